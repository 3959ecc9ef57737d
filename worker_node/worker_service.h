// The Worker gRPC service (Experts and Hints streams) over a WorkerCore.
// Kept apart so that only worker_service.cpp compiles grpcpp headers.
#pragma once

#include <atomic>
#include <memory>

#include "absl/time/time.h"
#include "cluster/peer_auth.h"
#include "worker_node/worker_core.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace odmoe {

class WorkerService {
 public:
  /// `auth`: the worker's credentials (outlive the service): only the main
  /// node opens Experts streams, only the shadow sends Hints. The newest
  /// Experts stream of the main node owns the result channel; opening it ends
  /// the one before (a restarted main node takes over cleanly).
  /// `delay`: emulated one-way latency on what the streams receive (0 = none).
  WorkerService(WorkerCore& core, const PeerAuth& auth,
                absl::Duration delay = absl::ZeroDuration());
  ~WorkerService();
  grpc::Service* grpc_service();
  /// Ends every open stream (shutdown: their readers return at once).
  void CancelStreams();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
