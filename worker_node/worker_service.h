// The Worker gRPC service (Experts and Hints streams) over a WorkerCore.
// Kept apart so that only worker_service.cpp compiles grpcpp headers.
#pragma once

#include <atomic>
#include <memory>

#include "absl/time/time.h"
#include "worker_node/worker_core.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace odmoe {

class WorkerService {
 public:
  /// `delay`: emulated one-way latency on what the streams receive (0 = none).
  explicit WorkerService(WorkerCore& core, absl::Duration delay = absl::ZeroDuration());
  ~WorkerService();
  grpc::Service* grpc_service();
  /// Ends every open stream (shutdown: their readers return at once).
  void CancelStreams();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
