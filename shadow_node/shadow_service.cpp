#include "shadow_node/shadow_service.h"

#include <mutex>

#include "absl/strings/str_format.h"
#include "cluster/assignment.h"
#include "cluster/delay_line.h"
#include "cluster/peer_link.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

using HintStream = grpc::ClientWriter<v1::Hint>;

// One worker's Hints stream (write-only: the worker's HintAck comes at its end).
struct HintLink {
  HintLink(const WorkerSpec& worker, const PeerDialer& dialer)
      : link(PeerTarget{.kind = "worker",
                        .id = worker.id,
                        .address = worker.address,
                        .stream = "hint",
                        .max_receive_bytes = kSmallReplyBytes,
                        .check_welcome = nullptr,  // any worker that accepts
                        // A hint stream notices a dead worker only when it
                        // writes, and its group may take no layers now.
                        .broken_when_channel_not_ready = true},
             dialer,
             [this](const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext* ctx) {
               ack.Clear();
               return v1::Worker::NewStub(channel)->Hints(ctx, &ack);
             }) {}
  v1::HintAck ack;  // before `link`: the stream writes into it until its end
  PeerLink<HintStream> link;
};

}  // namespace

struct ShadowService::Impl final : public v1::Shadow::Service {
  Impl(const Topology& t, std::string node, uint64_t fp, const PeerAuth& a)
      : topology(t), auth(a), dialer{MakeHello(v1::ROLE_SHADOW, node, fp), &a} {}

  grpc::Status Follow(grpc::ServerContext* ctx,
                      grpc::ServerReaderWriter<v1::ShadowReply, v1::ShadowRequest>* stream)
      override {
    if (grpc::Status s = AuthorizeCall(*ctx, &auth, {PeerRole::kMain}, "Shadow.Follow");
        !s.ok()) {
      return s;
    }
    ShadowCore* core_ptr = core.load(std::memory_order_acquire);
    if (core_ptr == nullptr) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the shadow is still preparing its model; retry");
    }
    ShadowCore& core = *core_ptr;
    const uint64_t id = ++next_stream;
    ODMOE_LOG_INFO("follow stream {} opened by the main node at {}", id, PeerForLog(*ctx));
    std::mutex write_mu;
    auto write = [stream, &write_mu](const v1::ShadowReply& r) {
      std::lock_guard<std::mutex> lock(write_mu);
      stream->Write(r);
    };
    {
      // The newest stream owns the replies; the one before is ended.
      std::lock_guard<std::mutex> lock(owner_mu);
      if (owner_ctx != nullptr) {
        ODMOE_LOG_INFO("follow stream {} replaces stream {}", id, owner);
        owner_ctx->TryCancel();
      }
      owner = id;
      owner_ctx = ctx;
      core.Attach(id, write, [this](int group, const v1::Hint& h) { SendHint(group, h); });
    }
    v1::ShadowRequest req;
    {
      DelayLine line(absl::Microseconds(topology.wire_delay_us));  // emulated latency
      while (stream->Read(&req)) {
        auto handle = [&core, &write](const v1::ShadowRequest& req) {
          absl::Status s = core.Submit(req);
          if (s.ok()) return;
          ODMOE_LOG_WARN("rejected message from the main node: {}", s.message());
          v1::ShadowReply reply;
          v1::ShadowDone* done = reply.mutable_done();
          done->set_request(req.has_begin()   ? req.begin().request()
                            : req.has_align() ? req.align().request()
                                              : 0);
          done->set_error_code(static_cast<int>(s.code()));
          done->set_error_message(std::string(s.message()));
          write(reply);
        };
        if (line.active()) {
          line.Push([handle, req]() { handle(req); });
        } else {
          handle(req);
        }
      }
    }
    bool was_owner = false;
    {
      std::lock_guard<std::mutex> lock(owner_mu);
      was_owner = core.Detach(id);
      if (owner == id) {
        owner = 0;
        owner_ctx = nullptr;
      }
    }
    if (was_owner) core.AbortAll();
    ODMOE_LOG_INFO("follow stream {} closed", id);
    return grpc::Status::OK;
  }

  // Every worker of the group that computes some of the layer's experts gets
  // the whole prediction and takes its own positions from it (worker i of G:
  // i, i+G, ...); with G > k the workers i >= k compute nothing of it.
  void SendHint(int group, const v1::Hint& hint) {
    const std::vector<int> members = topology.GroupMembers(group);
    for (size_t i = 0; i < members.size(); ++i) {
      const int w = members[i];
      if (PositionsOfWorker(static_cast<int>(i), topology.group_size, hint.experts_size())
              .empty()) {
        continue;
      }
      if (w < 0 || w >= static_cast<int>(links.size())) continue;
      PeerLink<HintStream>& link = links[static_cast<size_t>(w)]->link;
      switch (link.Write(hint)) {
        case PeerWrite::kSent:
          ++hints_sent;
          break;
        case PeerWrite::kNotConnected:
          break;
        case PeerWrite::kFailed:
          ++hint_failures;
          ODMOE_LOG_WARN("hint stream to worker {} broke; reopening it in the background",
                         link.target().id);
          break;
      }
    }
  }

  std::atomic<ShadowCore*> core{nullptr};
  const Topology& topology;
  const PeerAuth& auth;
  const PeerDialer dialer;
  std::mutex owner_mu;
  uint64_t owner = 0;                          // the Follow stream replies go to
  grpc::ServerContext* owner_ctx = nullptr;    // its context (to end it when replaced)
  std::atomic<uint64_t> next_stream{0};
  std::vector<std::unique_ptr<HintLink>> links;
  std::atomic<uint64_t> hints_sent{0}, hint_failures{0};
  std::unique_ptr<PeerRejoin> rejoin;
};

ShadowService::ShadowService(const Topology& topology, std::string node_id, uint64_t fingerprint,
                             const PeerAuth& auth)
    : impl_(std::make_unique<Impl>(topology, std::move(node_id), fingerprint, auth)) {
  for (const WorkerSpec& w : topology.workers) {
    impl_->links.push_back(std::make_unique<HintLink>(w, impl_->dialer));
  }
}

ShadowService::~ShadowService() { Close(); }

grpc::Service* ShadowService::grpc_service() { return impl_.get(); }

void ShadowService::AttachCore(ShadowCore* core) {
  impl_->core.store(core, std::memory_order_release);
}

absl::Status ShadowService::ConnectWorkers(const std::atomic<bool>& cancel) {
  for (auto& hint : impl_->links) {
    ODMOE_RETURN_IF_ERROR(hint->link.Connect(cancel, absl::Seconds(120)));
  }
  return absl::OkStatus();
}

void ShadowService::StartRejoin() {
  if (impl_->rejoin) return;
  std::vector<PeerLinkBase*> links;
  for (auto& hint : impl_->links) links.push_back(&hint->link);
  impl_->rejoin = std::make_unique<PeerRejoin>(std::move(links));
}

void ShadowService::Close() {
  if (impl_->rejoin) impl_->rejoin->Stop();
  for (auto& hint : impl_->links) hint->link.Close();
}

uint64_t ShadowService::hints_sent() const { return impl_->hints_sent.load(); }
uint64_t ShadowService::hint_failures() const { return impl_->hint_failures.load(); }

}  // namespace odmoe
