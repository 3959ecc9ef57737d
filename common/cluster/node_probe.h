// Asking a running node how it is (Node.Status over gRPC), for odmoe-cluster
// and tests. No gRPC types leak out of this header.
//
//   ODMOE_ASSIGN_OR_RETURN(NodeProbe p, ProbeNode("127.0.0.1:7710", absl::Seconds(1)));
//   if (p.state == "ready") ...
//   for (const auto& [k, v] : p.entries) std::cout << k << " = " << v << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace odmoe {

struct NodeProbe {
  std::string node_id;
  std::string role;    // "main" | "shadow" | "worker"
  std::string state;   // "starting" | "ready" | "draining" | "failed"
  int64_t pid = 0;
  double uptime_seconds = 0;
  std::string detail;  // why it is not ready, when it is not
  std::vector<std::pair<std::string, std::string>> entries;  // counters, stable order
};

/// UNAVAILABLE when nothing answers at `address` within `timeout`.
absl::StatusOr<NodeProbe> ProbeNode(const std::string& address, absl::Duration timeout);

}  // namespace odmoe
