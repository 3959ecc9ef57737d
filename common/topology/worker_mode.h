// The worker modes (workers.mode): one table of names, read by the topology
// (its values and its error message), the main node (what prediction means to
// a mode), the worker (its slot policy, worker_node/slot_policy.h, registered
// under the same name) and the status a worker reports (the row's wire
// number, proto/odmoe.proto WorkerMemoryMode).
//
// A mode is a name with what the rest of the cluster must know about it:
//   hints          what the main node's predictions mean to it (used, ignored:
//                  the topology refuses a prediction mode; required: refuses none)
//   keeps_experts  a cache: experts stay after their task, in cache_experts slots
// How a worker decides which slot serves a task is its policy's business, not
// this table's.
//
//   ODMOE_ASSIGN_OR_RETURN(WorkerMode m, FindWorkerMode("lru_cache"));
//   if (m == WorkerMode::kLruCache) ...          // the built-in modes have constants
//   if (m.info().hints == WorkerModeHints::kIgnored) ...
//   std::string values = WorkerModeValues();    // "on_demand | resident | ... "
//
// A new mode is one row in worker_mode.cpp (built in), or one
// RegisterSlotPolicy call (worker_node/slot_policy.h) that registers its row
// here and its policy there (a test's mode).
//
// Thread-safety: the table may grow (RegisterWorkerMode) while it is read;
// rows are never removed or changed, so a WorkerMode and the row it refers to
// stay valid for the life of the process.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace odmoe {

/// What the main node's predictions (hints) mean to a worker mode.
enum class WorkerModeHints {
  kOptional,  // used when there are any (prediction none is allowed)
  kIgnored,   // never used: a prediction mode other than none is refused
  kRequired,  // the mode is fed by them: prediction none is refused
};

/// One row of the table.
struct WorkerModeInfo {
  std::string name;  // the workers.mode value: lowercase letters, digits, '_'
  std::string help;  // one line for people (docs, errors)
  WorkerModeHints hints = WorkerModeHints::kOptional;
  bool keeps_experts = false;  // a cache (cache_experts slots, experts stay after their task)
  // Its number in Node.Status (WorkerStats.mode: proto/odmoe.proto's
  // WorkerMemoryMode names the built-in ones); 0 when registered: the next free.
  int wire = 0;
};

/// A registered worker mode, by name. Compares by name; the default is
/// on_demand.
class WorkerMode {
 public:
  constexpr WorkerMode() = default;
  std::string_view name() const { return name_; }
  /// Its row of the table.
  const WorkerModeInfo& info() const;
  bool operator==(const WorkerMode& other) const { return name_ == other.name_; }

  // The built-in modes.
  static const WorkerMode kOnDemand, kResident, kLruCache, kLfuCache, kUtilityCache;

 private:
  friend absl::StatusOr<WorkerMode> FindWorkerMode(std::string_view name);
  explicit constexpr WorkerMode(std::string_view name) : name_(name) {}
  std::string_view name_ = "on_demand";  // a row's name (the table's storage)
};

inline constexpr WorkerMode WorkerMode::kOnDemand{"on_demand"};
inline constexpr WorkerMode WorkerMode::kResident{"resident"};
inline constexpr WorkerMode WorkerMode::kLruCache{"lru_cache"};
inline constexpr WorkerMode WorkerMode::kLfuCache{"lfu_cache"};
inline constexpr WorkerMode WorkerMode::kUtilityCache{"utility_cache"};

/// The mode named `name`; INVALID_ARGUMENT naming the known ones otherwise.
absl::StatusOr<WorkerMode> FindWorkerMode(std::string_view name);
/// Adds a row (a wire number of 0 takes the next free one). INVALID_ARGUMENT
/// for a malformed name or a wire number in use, ALREADY_EXISTS for a name
/// in use.
absl::Status RegisterWorkerMode(WorkerModeInfo info);
/// Every mode, in table order (the built-in ones first), and as
/// (name, mode) pairs for a parser of enumerated settings.
std::vector<WorkerModeInfo> WorkerModes();
std::vector<std::pair<std::string, WorkerMode>> WorkerModeChoices();
/// "on_demand | resident | lru_cache | lfu_cache | utility_cache" (and any
/// registered later).
std::string WorkerModeValues();

/// Whether mode `m` works with the prediction mode named `prediction`
/// ("none": no hints): INVALID_ARGUMENT saying why not (a mode that ignores
/// hints with a prediction, one fed by them without).
absl::Status CheckWorkerModeHints(WorkerMode m, std::string_view prediction);

/// "on_demand" | "resident" | "lru_cache" | "lfu_cache" | "utility_cache" | ...
inline std::string_view WorkerModeName(WorkerMode m) { return m.name(); }
/// True for the modes that keep experts after their task (cache_experts slots).
inline bool IsCacheMode(WorkerMode m) { return m.info().keeps_experts; }

}  // namespace odmoe
