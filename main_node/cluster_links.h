// The main node's links to the rest of the cluster: one Experts stream per
// worker (tasks and hints out, results back) and the Follow stream to the
// shadow (requests and alignments out, predictions back). Reader threads file
// what arrives: results by task id, predictions on the PredictionBoard.
// Each stream is a PeerLink (cluster/peer_link.h: handshake, credentials,
// receive limit, reconnect), the same type as the shadow's hint streams.
// Only cluster_links.cpp sees grpcpp.
//
//   std::unique_ptr<ClusterLinks> links =
//       ClusterLinks::Create(topology, model.config(), "main", model.fingerprint(), *auth);
//   ODMOE_RETURN_IF_ERROR(links->Connect(cancel));      // handshakes, streams
//   links->SendToWorker(3, request);
//   ODMOE_ASSIGN_OR_RETURN(v1::ExpertResult r, links->TakeResult(task_id, 3, absl::Seconds(60)));
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"
#include "main_node/prediction_board.h"
#include "model/model_config.h"
#include "topology/topology.h"

namespace odmoe {

/// Protobuf bytes through the main node's links (not HTTP/2 or TCP framing).
struct LinkBytes {
  uint64_t to_workers = 0, from_workers = 0, to_shadow = 0, from_shadow = 0;
  LinkBytes operator-(const LinkBytes& o) const {
    return {to_workers - o.to_workers, from_workers - o.from_workers, to_shadow - o.to_shadow,
            from_shadow - o.from_shadow};
  }
};

class ClusterLinks {
 public:
  /// `config` is the model's (predictions that arrive are checked against it;
  /// replies larger than a result of it can be are refused by gRPC). `auth`:
  /// the main node's credentials (outlive the links), sent with every call.
  static std::unique_ptr<ClusterLinks> Create(const Topology& topology, const ModelConfig& config,
                                              std::string node_id, uint64_t fingerprint,
                                              const PeerAuth& auth);
  ~ClusterLinks();

  /// Handshakes with every worker (checking that each is the worker the
  /// topology places at its index) and with the shadow when prediction is
  /// `shadow`, then opens the streams. Retries while peers come up, until
  /// `cancel`. FAILED_PRECONDITION when a peer refuses.
  absl::Status Connect(const std::atomic<bool>& cancel);
  /// From now on, reconnects (handshake + streams) every worker and the
  /// shadow whose stream broke, in the background, until Close().
  void StartRejoin();
  void Close();

  /// Whether the worker's expert stream is open.
  bool worker_connected(int worker) const;

  absl::Status SendToWorker(int worker, const v1::WorkerRequest& request);
  /// Waits for the result of `task_id` (sent to `worker`). UNAVAILABLE when
  /// the worker's stream broke or nothing came within `timeout`; a stream
  /// that stayed silent that long is ended, and the rejoin loop reopens it
  /// (a result channel that went quiet never stays in use).
  absl::StatusOr<v1::ExpertResult> TakeResult(uint64_t task_id, int worker,
                                              absl::Duration timeout);

  /// Whether a shadow stream is open and healthy.
  bool shadow_connected() const;
  /// Ends the shadow stream (the rejoin loop reopens it): the engine calls
  /// it when the shadow stayed silent for two requests in a row.
  void ResetShadow(std::string_view why);
  absl::Status SendToShadow(const v1::ShadowRequest& request);
  PredictionBoard& predictions();
  /// Bytes sent and received so far (a request takes the difference).
  LinkBytes bytes() const;

 private:
  struct Impl;
  explicit ClusterLinks(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
