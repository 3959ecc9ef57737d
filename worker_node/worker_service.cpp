#include "worker_node/worker_service.h"

#include <map>
#include <mutex>

#include "cluster/delay_line.h"
#include "cluster/grpc_util.h"
#include "util/logging.h"

namespace odmoe {

struct WorkerService::Impl final : public v1::Worker::Service {
  Impl(WorkerCore& c, absl::Duration d) : core(c), delay(d) {}

  grpc::Status Experts(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::ExpertResult, v1::WorkerRequest>* stream)
      override {
    const uint64_t id = ++next_stream;
    Track(id, ctx);
    ODMOE_LOG_INFO("expert stream {} opened by {}", id, ctx->peer());
    core.AttachSink(id, [stream](const v1::ExpertResult& r) { stream->Write(r); });
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
    core.DetachSink(id);
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
    } else {
      ODMOE_LOG_WARN("empty or unknown request on expert stream {}", id);
    }
  }

  grpc::Status Hints(grpc::ServerContext* ctx, grpc::ServerReader<v1::Hint>* reader,
                     v1::HintAck* ack) override {
    const uint64_t id = ++next_stream;
    Track(id, ctx);
    v1::Hint hint;
    std::atomic<uint64_t> received{0}, rejected{0};
    const std::string peer = ctx->peer();
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
  const absl::Duration delay;
  std::atomic<uint64_t> next_stream{0};
  std::mutex mu;
  std::map<uint64_t, grpc::ServerContext*> open;
  bool cancelled = false;
};

WorkerService::WorkerService(WorkerCore& core, absl::Duration delay)
    : impl_(std::make_unique<Impl>(core, delay)) {}
WorkerService::~WorkerService() = default;
grpc::Service* WorkerService::grpc_service() { return impl_.get(); }
void WorkerService::CancelStreams() { impl_->CancelAll(); }

}  // namespace odmoe
