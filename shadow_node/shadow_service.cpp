#include "shadow_node/shadow_service.h"

#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "cluster/assignment.h"
#include "cluster/delay_line.h"
#include "cluster/grpc_util.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

// One worker's Hints stream.
struct HintLink {
  std::string id, address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Worker::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  v1::HintAck ack;
  std::unique_ptr<grpc::ClientWriter<v1::Hint>> writer;
  std::mutex mu;
  bool broken = false;
};

}  // namespace

struct ShadowService::Impl final : public v1::Shadow::Service {
  Impl(const Topology& t, std::string node, uint64_t fp, const PeerAuth& a)
      : topology(t), node_id(std::move(node)), fingerprint(fp), auth(a) {}

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
    ODMOE_LOG_INFO("follow stream {} opened by the main node at {}", id, ctx->peer());
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
    if (was_owner) core.AbortCurrent();
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
      HintLink& link = *links[static_cast<size_t>(w)];
      std::lock_guard<std::mutex> lock(link.mu);
      if (link.broken || !link.writer) continue;
      if (link.writer->Write(hint)) {
        ++hints_sent;
      } else {
        link.broken = true;
        ++hint_failures;
        ODMOE_LOG_WARN("hint stream to worker {} broke; reopening it in the background",
                       link.id);
      }
    }
  }

  v1::Hello MakeHello() const {
    v1::Hello hello;
    hello.set_protocol_version(kProtocolVersion);
    hello.set_role(v1::ROLE_SHADOW);
    hello.set_node_id(node_id);
    hello.set_model_fingerprint(fingerprint);
    return hello;
  }

  // Ends a link's stream (mu held).
  static void Drop(HintLink& link) {
    if (!link.writer) return;
    link.ctx->TryCancel();
    link.writer->Finish();
    link.writer.reset();
  }

  // Handshake, then a fresh Hints stream.
  absl::Status Connect(HintLink& link, const std::atomic<bool>& cancel, absl::Duration patience) {
    auto channel = MakeChannel(link.address, kSmallReplyBytes);
    absl::StatusOr<v1::Welcome> w =
        HandshakeWithRetry(*channel, MakeHello(), patience, &cancel, &auth);
    if (!w.ok()) {
      return absl::Status(w.status().code(), absl::StrFormat("worker %s at %s: %s", link.id,
                                                             link.address, w.status().message()));
    }
    std::lock_guard<std::mutex> lock(link.mu);
    Drop(link);
    link.channel = channel;
    link.stub = v1::Worker::NewStub(link.channel);
    link.ctx = std::make_unique<grpc::ClientContext>();
    AttachCredential(*link.ctx, &auth);
    link.writer = link.stub->Hints(link.ctx.get(), &link.ack);
    link.broken = false;
    return absl::OkStatus();
  }

  std::atomic<ShadowCore*> core{nullptr};
  const Topology& topology;
  const std::string node_id;
  const uint64_t fingerprint;
  const PeerAuth& auth;
  std::mutex owner_mu;
  uint64_t owner = 0;                          // the Follow stream replies go to
  grpc::ServerContext* owner_ctx = nullptr;    // its context (to end it when replaced)
  std::atomic<uint64_t> next_stream{0};
  std::vector<std::unique_ptr<HintLink>> links;
  std::atomic<uint64_t> hints_sent{0}, hint_failures{0};
  std::atomic<bool> closing{false};
  std::thread rejoin;
};

ShadowService::ShadowService(const Topology& topology, std::string node_id, uint64_t fingerprint,
                             const PeerAuth& auth)
    : impl_(std::make_unique<Impl>(topology, std::move(node_id), fingerprint, auth)) {
  for (const WorkerSpec& w : topology.workers) {
    auto link = std::make_unique<HintLink>();
    link->id = w.id;
    link->address = w.address;
    impl_->links.push_back(std::move(link));
  }
}

ShadowService::~ShadowService() { Close(); }

grpc::Service* ShadowService::grpc_service() { return impl_.get(); }

void ShadowService::AttachCore(ShadowCore* core) {
  impl_->core.store(core, std::memory_order_release);
}

absl::Status ShadowService::ConnectWorkers(const std::atomic<bool>& cancel) {
  for (auto& link : impl_->links) {
    ODMOE_RETURN_IF_ERROR(impl_->Connect(*link, cancel, absl::Seconds(120)));
  }
  return absl::OkStatus();
}

void ShadowService::StartRejoin() {
  if (impl_->rejoin.joinable()) return;
  impl_->rejoin = std::thread([this] {
    while (!impl_->closing.load()) {
      for (auto& link : impl_->links) {
        if (impl_->closing.load()) break;
        bool broken;
        {
          // A stream whose connection dropped counts as broken before a
          // write to it fails (its group may not be taking layers now).
          std::lock_guard<std::mutex> lock(link->mu);
          broken = link->broken ||
                   (link->channel && link->channel->GetState(false) != GRPC_CHANNEL_READY);
        }
        if (broken && impl_->Connect(*link, impl_->closing, absl::Milliseconds(500)).ok()) {
          ODMOE_LOG_INFO("hint stream to worker {} reopened", link->id);
        }
      }
      for (int i = 0; i < 10 && !impl_->closing.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
}

void ShadowService::Close() {
  impl_->closing = true;
  if (impl_->rejoin.joinable()) impl_->rejoin.join();
  for (auto& link : impl_->links) {
    std::lock_guard<std::mutex> lock(link->mu);
    impl_->Drop(*link);
    link->broken = true;
  }
}

uint64_t ShadowService::hints_sent() const { return impl_->hints_sent.load(); }
uint64_t ShadowService::hint_failures() const { return impl_->hint_failures.load(); }

}  // namespace odmoe
