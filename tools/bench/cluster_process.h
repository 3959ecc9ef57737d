// A benchmark deployment as real processes: the topology is written to a run
// directory and started with `odmoe-cluster up` (every node its own process,
// exactly as an operator runs it), stopped with `odmoe-cluster down`; or a
// cluster that is already running is attached to (never stopped). Node
// counters come from Node.Status.
//
//   ODMOE_ASSIGN_OR_RETURN(auto c, ClusterProcess::Start(topology, "odmoe", run_dir, bin_dir));
//   ODMOE_ASSIGN_OR_RETURN(auto nodes, c->Snapshot());   // counters of every node
//   c->Stop();
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/peer_auth.h"
#include "odmoe.pb.h"
#include "topology/topology.h"

namespace odmoe::bench {

/// One node's Node.Status counters (typed fields, checked by ProbeNode).
struct NodeCounters {
  std::string id;
  std::string role;                       // "main" | "shadow" | "worker"
  std::optional<v1::WorkerStats> worker;  // set for workers
  v1::ProcessStats process;
};

class ClusterProcess {
 public:
  /// Writes `<run_dir>/<name>.yaml` and starts it (`odmoe-cluster up`, which
  /// waits until every node is ready). The cluster is stopped on failure.
  static absl::StatusOr<std::unique_ptr<ClusterProcess>> Start(const Topology& topology,
                                                               const std::string& name,
                                                               const std::string& run_dir,
                                                               const std::string& bin_dir,
                                                               int timeout_seconds);
  /// A cluster someone else runs (Stop does nothing).
  static std::unique_ptr<ClusterProcess> Attach(const Topology& topology);
  ~ClusterProcess();

  const Topology& topology() const { return topology_; }
  std::string main_address() const { return topology_.main.address; }
  /// Every node's counters, in topology order.
  absl::StatusOr<std::vector<NodeCounters>> Snapshot() const;
  /// Addresses of every node (main, shadow, workers).
  std::vector<std::string> node_addresses() const;
  /// An operator's credentials for this cluster (Node.Trace): the secret
  /// `odmoe-cluster up` generated in the run directory, or the topology's
  /// cluster_secret_file (an attached cluster: that, or the secret in
  /// odmoe-cluster's default run directory ./odmoe-run/<topology name>).
  absl::StatusOr<std::shared_ptr<const PeerAuth>> OperatorAuth() const;
  void Stop();

 private:
  ClusterProcess() = default;
  Topology topology_;
  std::string yaml_path_, run_dir_, bin_dir_;
  bool owned_ = false;
};

/// Runs argv (no shell); returns its exit code and combined output.
int RunProgram(const std::vector<std::string>& argv, std::string* output);

}  // namespace odmoe::bench
