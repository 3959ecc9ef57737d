// The Shadow gRPC service (the main node's Follow stream) and the shadow's
// Hints streams to the workers (each a PeerLink, cluster/peer_link.h, like
// the main node's links). Only shadow_service.cpp sees grpcpp.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "cluster/peer_auth.h"
#include "shadow_node/shadow_core.h"
#include "topology/topology.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace odmoe {

class ShadowService {
 public:
  /// The service answers Follow with UNAVAILABLE until AttachCore(). `auth`
  /// (the shadow's credentials, outliving the service) signs the hint streams
  /// and admits only the main node's Follow streams; the newest one owns the
  /// shadow's replies and ends the one before (a restarted main node takes
  /// over cleanly, and closing a stream that no longer owns them changes
  /// nothing).
  ShadowService(const Topology& topology, std::string node_id, uint64_t fingerprint,
                const PeerAuth& auth);
  ~ShadowService();
  grpc::Service* grpc_service();
  /// The quantized model's core, once it exists (kept alive by the caller
  /// until Close()); Follow streams are served from then on.
  void AttachCore(ShadowCore* core);

  /// Handshakes with every worker and opens a Hints stream to each (retrying
  /// while they come up, until `cancel`). FAILED_PRECONDITION when a worker
  /// refuses (model or protocol mismatch).
  absl::Status ConnectWorkers(const std::atomic<bool>& cancel);
  /// From now on, reopens (handshake + stream) every hint stream that broke,
  /// in the background (a worker that restarted gets hints again).
  void StartRejoin();
  /// Closes the hint streams.
  void Close();
  uint64_t hints_sent() const;
  uint64_t hint_failures() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
