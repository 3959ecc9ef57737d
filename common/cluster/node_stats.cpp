#include "cluster/node_stats.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/protocol.h"
#include "topology/worker_mode.h"

namespace odmoe {
namespace {

absl::Status CheckSeconds(const std::string& who, const char* field, double v) {
  if (std::isfinite(v) && v >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: status field %s is %g; expected finite seconds >= 0", who, field, v));
}

absl::Status CheckRange(const std::string& who, const char* field, int64_t v, int64_t lo,
                        int64_t hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: status field %s is %d; expected %d..%d", who, field, v, lo, hi));
}

absl::Status ValidateWorkerStats(const v1::WorkerStats& w, const std::string& who) {
  absl::Status s = CheckRange(who, "worker.group_size", w.group_size(), 1, INT32_MAX);
  if (s.ok()) s = CheckRange(who, "worker.group", w.group(), 0, INT32_MAX);
  if (s.ok()) {
    s = CheckRange(who, "worker.index_in_group", w.index_in_group(), 0, w.group_size() - 1);
  }
  if (s.ok()) s = CheckRange(who, "worker.experts_per_layer", w.experts_per_layer(), 0, INT32_MAX);
  if (s.ok()) s = CheckRange(who, "worker.slots", w.slots(), 0, INT32_MAX);
  if (s.ok()) s = CheckRange(who, "worker.experts_held", w.experts_held(), 0, w.slots());
  if (s.ok()) {
    s = CheckRange(who, "worker.experts_held_peak", w.experts_held_peak(), 0, w.slots());
  }
  // A mode is known by its row's wire number (topology/worker_mode.h); the
  // proto enum names the built-in ones.
  if (s.ok() && WorkerMemoryModeName(w.mode()) == "unspecified") {
    std::string expected;
    for (const WorkerModeInfo& m : WorkerModes()) {
      absl::StrAppend(&expected, expected.empty() ? "" : ", ", m.name);
    }
    s = absl::InvalidArgumentError(absl::StrFormat(
        "%s: status field worker.mode is %d; expected one of %s", who, static_cast<int>(w.mode()),
        expected));
  }
  if (s.ok()) s = CheckSeconds(who, "worker.load_seconds", w.load_seconds());
  if (s.ok()) s = CheckSeconds(who, "worker.compute_seconds", w.compute_seconds());
  if (s.ok()) s = CheckSeconds(who, "worker.stall_seconds", w.stall_seconds());
  return s;
}

}  // namespace

std::string WorkerMemoryModeName(v1::WorkerMemoryMode mode) {
  for (const WorkerModeInfo& m : WorkerModes()) {
    if (m.wire != 0 && m.wire == static_cast<int>(mode)) return m.name;
  }
  return "unspecified";
}

absl::Status ValidateNodeStatus(const v1::NodeStatus& status, const std::string& address) {
  const std::string who =
      absl::StrFormat("%s %s at %s", RoleName(status.role()), status.node_id(), address);
  if (status.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s speaks protocol version %d, this node version %d; run the same odmoe build "
        "everywhere",
        who, status.protocol_version(), kProtocolVersion));
  }
  const bool worker = status.role() == v1::ROLE_WORKER;
  if (worker != status.has_worker()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", who,
                        worker ? "a worker's status without its worker stats"
                               : "worker stats in the status of a node that is not a worker"));
  }
  if (worker) {
    if (absl::Status s = ValidateWorkerStats(status.worker(), who); !s.ok()) return s;
  }
  return CheckSeconds(who, "process.cpu_seconds", status.process().cpu_seconds());
}

StatusText WorkerStatsEntries(const v1::WorkerStats& s) {
  return {
      {"group", absl::StrFormat("%d (slot %d)", s.group(), s.index_in_group())},
      {"group_size", absl::StrCat(s.group_size())},
      {"experts_per_layer", absl::StrCat(s.experts_per_layer())},
      {"mode", WorkerMemoryModeName(s.mode())},
      {"load_bandwidth_bytes_per_second", absl::StrCat(s.load_bandwidth_bytes_per_second())},
      {"memory_budget_bytes", absl::StrCat(s.memory_budget_bytes())},
      {"expert_bytes", absl::StrCat(s.expert_bytes())},
      {"slots", absl::StrCat(s.slots())},
      {"experts_held", absl::StrCat(s.experts_held())},
      {"experts_held_peak", absl::StrCat(s.experts_held_peak())},
      {"memory_peak_bytes", absl::StrCat(s.memory_peak_bytes())},
      {"tasks", absl::StrCat(s.tasks())},
      {"task_errors", absl::StrCat(s.task_errors())},
      {"hits", absl::StrCat(s.hits())},
      {"misses", absl::StrCat(s.misses())},
      {"reloads", absl::StrCat(s.reloads())},
      {"step_experts_peak", absl::StrCat(s.step_experts_peak())},
      {"loads", absl::StrCat(s.loads())},
      {"bytes_loaded", absl::StrCat(s.bytes_loaded())},
      {"load_seconds", absl::StrFormat("%.6f", s.load_seconds())},
      {"compute_seconds", absl::StrFormat("%.6f", s.compute_seconds())},
      {"stall_seconds", absl::StrFormat("%.6f", s.stall_seconds())},
      {"hints_received", absl::StrCat(s.hints_received())},
      {"hints_rejected", absl::StrCat(s.hints_rejected())},
      {"hints_stale", absl::StrCat(s.hints_stale())},
      {"host_computes", absl::StrCat(s.host_computes())},
      {"admissions", absl::StrCat(s.admissions())},
      {"substitutions", absl::StrCat(s.substitutions())},
  };
}

StatusText ProcessStatsEntries(const v1::ProcessStats& s) {
  return {{"process_rss_bytes", absl::StrCat(s.rss_bytes())},
          {"process_peak_rss_bytes", absl::StrCat(s.peak_rss_bytes())},
          {"process_cpu_seconds", absl::StrFormat("%.6f", s.cpu_seconds())}};
}

}  // namespace odmoe
