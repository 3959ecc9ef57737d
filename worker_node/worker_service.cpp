#include "worker_node/worker_service.h"

#include <map>
#include <mutex>

#include "cluster/delay_line.h"
#include "cluster/grpc_util.h"
#include "util/logging.h"

namespace odmoe {

struct WorkerService::Impl final : public v1::Worker::Service {
  Impl(WorkerCore& c, const PeerAuth& a, absl::Duration d) : core(c), auth(a), delay(d) {}

  grpc::Status Experts(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::ExpertResult, v1::WorkerRequest>* stream)
      override {
    if (grpc::Status s = AuthorizeCall(*ctx, &auth, {PeerRole::kMain}, "Worker.Experts");
        !s.ok()) {
      return s;
    }
    const uint64_t id = ++next_stream;
    Track(id, ctx);
    ODMOE_LOG_INFO("expert stream {} opened by the main node at {}", id, PeerForLog(*ctx));
    TakeOwnership(id, ctx, stream);
    v1::WorkerRequest req;
    {
      DelayLine line(delay);  // emulated link latency (wire.emulated_delay); 0 = none
      while (stream->Read(&req)) {
        if (line.active()) {
          line.Push([this, id, req]() { Handle(id, req); });
        } else {
          Handle(id, req);
        }
      }
    }
    ReleaseOwnership(id);
    Untrack(id);
    ODMOE_LOG_INFO("expert stream {} closed", id);
    return grpc::Status::OK;
  }

  void Handle(uint64_t id, const v1::WorkerRequest& req) {
    if (req.has_task()) {
      absl::Status s = core.SubmitTask(req.task());
      if (!s.ok()) ODMOE_LOG_WARN("rejected task {}: {}", req.task().task_id(), s.message());
    } else if (req.has_hint()) {
      absl::Status s = core.AddHint(req.hint());
      if (!s.ok()) ODMOE_LOG_WARN("rejected hint: {}", s.message());
    } else if (req.has_hints()) {
      for (const v1::Hint& h : req.hints().hints()) {
        absl::Status s = core.AddHint(h);
        if (!s.ok()) ODMOE_LOG_WARN("rejected hint: {}", s.message());
      }
    } else {
      ODMOE_LOG_WARN("empty or unknown request on expert stream {}", id);
    }
  }

  grpc::Status Hints(grpc::ServerContext* ctx, grpc::ServerReader<v1::Hint>* reader,
                     v1::HintAck* ack) override {
    if (grpc::Status s = AuthorizeCall(*ctx, &auth, {PeerRole::kShadow}, "Worker.Hints");
        !s.ok()) {
      return s;
    }
    const uint64_t id = ++next_stream;
    Track(id, ctx);
    v1::Hint hint;
    std::atomic<uint64_t> received{0}, rejected{0};
    const std::string peer = PeerForLog(*ctx);
    {
      DelayLine line(delay);
      while (reader->Read(&hint)) {
        ++received;
        line.Push([this, hint, &rejected, &peer]() {
          absl::Status s = core.AddHint(hint);
          if (!s.ok()) {
            ++rejected;
            ODMOE_LOG_WARN("rejected hint from {}: {}", peer, s.message());
          }
        });
      }
    }
    Untrack(id);
    ack->set_hints_received(received);
    ack->set_hints_rejected(rejected);
    return grpc::Status::OK;
  }

  // The result channel goes to stream `id`; the stream that had it is ended
  // (its reader returns, and its main node, if still alive, reopens).
  void TakeOwnership(uint64_t id, grpc::ServerContext* ctx,
                     grpc::ServerReaderWriter<v1::ExpertResult, v1::WorkerRequest>* stream) {
    std::lock_guard<std::mutex> lock(mu);
    if (owner != 0) {
      if (auto it = open.find(owner); it != open.end()) {
        ODMOE_LOG_INFO("expert stream {} replaces stream {}", id, owner);
        it->second->TryCancel();
      }
    }
    owner = id;
    core.AttachSink(id, [stream](const v1::ExpertResult& r) { stream->Write(r); });
  }
  void ReleaseOwnership(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    core.DetachSink(id);  // only if it is still the attached one
    if (owner == id) owner = 0;
  }

  void Track(uint64_t id, grpc::ServerContext* ctx) {
    std::lock_guard<std::mutex> lock(mu);
    if (cancelled) ctx->TryCancel();
    open[id] = ctx;
  }
  void Untrack(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    open.erase(id);
  }
  void CancelAll() {
    std::lock_guard<std::mutex> lock(mu);
    cancelled = true;
    for (auto& [id, ctx] : open) ctx->TryCancel();
  }

  WorkerCore& core;
  const PeerAuth& auth;
  const absl::Duration delay;
  std::atomic<uint64_t> next_stream{0};
  std::mutex mu;
  std::map<uint64_t, grpc::ServerContext*> open;
  bool cancelled = false;
  uint64_t owner = 0;  // the Experts stream results go to (0 = none)
};

WorkerService::WorkerService(WorkerCore& core, const PeerAuth& auth, absl::Duration delay)
    : impl_(std::make_unique<Impl>(core, auth, delay)) {}
WorkerService::~WorkerService() = default;
grpc::Service* WorkerService::grpc_service() { return impl_.get(); }
void WorkerService::CancelStreams() { impl_->CancelAll(); }

}  // namespace odmoe
