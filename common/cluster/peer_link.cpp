#include "cluster/peer_link.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "util/logging.h"

namespace odmoe {

v1::Hello MakeHello(v1::Role role, const std::string& node_id, uint64_t fingerprint) {
  v1::Hello h;
  h.set_protocol_version(kProtocolVersion);
  h.set_role(role);
  h.set_node_id(node_id);
  h.set_model_fingerprint(fingerprint);
  return h;
}

PeerLinkBase::PeerLinkBase(PeerTarget target, const PeerDialer& dialer, bool has_reader,
                           std::function<void()> on_end)
    : target_(std::move(target)),
      dialer_(dialer),
      has_reader_(has_reader),
      on_end_(std::move(on_end)) {}

PeerLinkBase::~PeerLinkBase() = default;

absl::Status PeerLinkBase::Connect(const std::atomic<bool>& cancel, absl::Duration patience) {
  std::shared_ptr<grpc::Channel> channel = MakeChannel(target_.address, target_.max_receive_bytes);
  absl::StatusOr<v1::Welcome> w =
      HandshakeWithRetry(*channel, dialer_.hello, patience, &cancel, dialer_.auth);
  if (!w.ok()) {
    return absl::Status(w.status().code(),
                        absl::StrFormat("%s %s at %s: %s", target_.kind, target_.id,
                                        target_.address, w.status().message()));
  }
  if (target_.check_welcome) {
    if (absl::Status s = target_.check_welcome(*w); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  DropLocked();
  channel_ = std::move(channel);
  ctx_ = std::make_unique<grpc::ClientContext>();
  AttachCredential(*ctx_, dialer_.auth);
  OpenStream(channel_, ctx_.get());
  broken_ = false;
  if (has_reader_) {
    reader_ = std::thread([this] {
      const grpc::Status s = ReadUntilEnd();
      broken_ = true;
      ODMOE_LOG_WARN("{} stream to {} {} ended: {}", target_.stream, target_.kind, target_.id,
                     s.ok() ? std::string("closed") : s.error_message());
      if (on_end_) on_end_();
    });
  }
  return absl::OkStatus();
}

bool PeerLinkBase::NeedsRejoin() const {
  if (broken_.load()) return true;
  if (!target_.broken_when_channel_not_ready) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return channel_ && channel_->GetState(false) != GRPC_CHANNEL_READY;
}

bool PeerLinkBase::Reset(std::string_view why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.exchange(true)) return false;
  ODMOE_LOG_WARN("{} {} at {}: {}; reopening its {} stream", target_.kind, target_.id,
                 target_.address, std::string(why), target_.stream);
  if (ctx_) ctx_->TryCancel();
  return true;
}

void PeerLinkBase::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  DropLocked();
  broken_ = true;
}

void PeerLinkBase::DropLocked() {
  if (ctx_) ctx_->TryCancel();
  if (reader_.joinable()) {
    reader_.join();  // it has called Finish()
  } else if (!has_reader_) {
    FinishStream();
  }
  ReleaseStream();
}

PeerRejoin::PeerRejoin(std::vector<PeerLinkBase*> links) : links_(std::move(links)) {
  thread_ = std::thread([this] { Loop(); });
}

void PeerRejoin::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void PeerRejoin::Loop() {
  while (!stopping_.load()) {
    for (PeerLinkBase* link : links_) {
      if (stopping_.load()) break;
      if (!link->NeedsRejoin()) continue;
      if (link->Connect(stopping_, absl::Milliseconds(500)).ok()) {
        const PeerTarget& t = link->target();
        ODMOE_LOG_INFO("{} {} at {}: {} stream reopened", t.kind, t.id, t.address, t.stream);
      }
    }
    for (int i = 0; i < 10 && !stopping_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace odmoe
