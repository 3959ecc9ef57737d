// The typed counters of a Node.Status answer (proto/odmoe.proto: WorkerStats,
// ProcessStats): checking one that arrived, and writing one out as text for
// people. Programs read the fields themselves; the text is for odmoe-cluster
// status and logs only (it is never parsed back).
//
//   v1::NodeStatus status = ...;                    // from Node.Status
//   ODMOE_RETURN_IF_ERROR(ValidateNodeStatus(status, address));
//   if (status.has_worker()) metrics.hits = status.worker().hits();
//   for (const auto& [k, v] : WorkerStatsEntries(status.worker())) std::cout << k << " = " << v;
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "odmoe.pb.h"

namespace odmoe {

/// Key and value, as odmoe-cluster status shows them.
using StatusText = std::vector<std::pair<std::string, std::string>>;

/// The worker mode with this wire number (topology/worker_mode.h's table:
/// "on_demand" | "resident" | "lru_cache" | ...), or "unspecified".
std::string WorkerMemoryModeName(v1::WorkerMemoryMode mode);

/// Checks an answer received from `address`: the protocol version, that
/// worker stats come from a worker and every worker sends them, that its
/// placement and counts are possible (0 <= held <= slots, the slot inside the
/// group, a known mode) and that times are finite and not negative.
/// FAILED_PRECONDITION for another protocol version, INVALID_ARGUMENT
/// otherwise, naming the node, the field and the value.
absl::Status ValidateNodeStatus(const v1::NodeStatus& status, const std::string& address);

/// The worker's counters as text, in the order odmoe-cluster status has
/// always shown them ("group" = "0 (slot 1)", "mode" = "on_demand", ...).
StatusText WorkerStatsEntries(const v1::WorkerStats& stats);
/// "process_rss_bytes", "process_peak_rss_bytes", "process_cpu_seconds".
StatusText ProcessStatsEntries(const v1::ProcessStats& stats);

}  // namespace odmoe
