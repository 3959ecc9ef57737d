// Asking a running node how it is (Node.Status over gRPC), for odmoe-cluster,
// the main node's /metrics, odmoe-bench and tests. No gRPC types leak out of
// this header. Programs read the typed counters (`worker`, `process`);
// `entries` is the text odmoe-cluster status shows.
//
//   ODMOE_ASSIGN_OR_RETURN(NodeProbe p, ProbeNode("127.0.0.1:7710", absl::Seconds(1)));
//   if (p.state == "ready") ...
//   if (p.worker) total_bytes_loaded += p.worker->bytes_loaded();
//   for (const auto& [k, v] : p.entries) std::cout << k << " = " << v << "\n";
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "odmoe.pb.h"

namespace odmoe {

struct NodeProbe {
  std::string node_id;
  std::string role;    // "main" | "shadow" | "worker"
  std::string state;   // "starting" | "ready" | "draining" | "failed"
  int64_t pid = 0;
  double uptime_seconds = 0;
  std::string detail;  // why it is not ready, when it is not
  // For people, in a stable order: the node's own text, then its worker and
  // process counters written out (cluster/node_stats.h). Never parsed.
  std::vector<std::pair<std::string, std::string>> entries;
  std::optional<v1::WorkerStats> worker;  // set when the node is a worker
  v1::ProcessStats process;
};

/// UNAVAILABLE when nothing answers at `address` within `timeout`; the
/// answer is checked first (ValidateNodeStatus: FAILED_PRECONDITION for a
/// node of another protocol version, INVALID_ARGUMENT for impossible counters).
absl::StatusOr<NodeProbe> ProbeNode(const std::string& address, absl::Duration timeout);

}  // namespace odmoe
