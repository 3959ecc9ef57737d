#include "topology/worker_mode.h"

#include <algorithm>
#include <deque>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace odmoe {
namespace {

// The built-in modes (their policies: worker_node/slot_policy_registry.cpp).
std::deque<WorkerModeInfo> BuiltIn() {
  using H = WorkerModeHints;
  return {
      {"on_demand",
       "loads the experts the hints predict (a prefetch) or a task asks for; evicts after the task",
       H::kOptional, false, 1},
      {"resident", "holds every expert it can be asked for, loaded once at start (fully cached)",
       H::kOptional, false, 2},
      {"lru_cache",
       "caching baseline: experts stay; a miss evicts the least recently used; no prediction",
       H::kIgnored, true, 3},
      {"lfu_cache",
       "caching baseline: experts stay; a miss evicts the least often used; no prediction",
       H::kIgnored, true, 4},
      {"utility_cache",
       "MoE-SpAc's utility-driven cache: prefetches from hints, admits hot experts while idle, "
       "evicts the lowest utility",
       H::kRequired, true, 5},
  };
}

struct Table {
  std::mutex mu;
  std::deque<WorkerModeInfo> rows = BuiltIn();  // a deque: rows never move
};

Table& TheTable() {
  static Table* table = new Table();  // never destroyed: modes outlive static destructors
  return *table;
}

const WorkerModeInfo* FindLocked(Table& t, std::string_view name) {
  for (const WorkerModeInfo& row : t.rows) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

std::string ValuesLocked(Table& t) {
  std::string out;
  for (const WorkerModeInfo& row : t.rows)
    absl::StrAppend(&out, out.empty() ? "" : " | ", row.name);
  return out;
}

}  // namespace

const WorkerModeInfo& WorkerMode::info() const {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  const WorkerModeInfo* row = FindLocked(t, name_);
  // Every WorkerMode names a row (FindWorkerMode or a built-in constant).
  return row != nullptr ? *row : t.rows.front();
}

absl::StatusOr<WorkerMode> FindWorkerMode(std::string_view name) {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  if (const WorkerModeInfo* row = FindLocked(t, name)) return WorkerMode(row->name);
  return absl::InvalidArgumentError(
      absl::StrFormat("no worker mode '%s' (expected %s)", name, ValuesLocked(t)));
}

absl::Status RegisterWorkerMode(WorkerModeInfo info) {
  const bool well_formed =
      !info.name.empty() && std::all_of(info.name.begin(), info.name.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
      });
  if (!well_formed) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker mode name '%s': expected lowercase letters, digits and '_'", info.name));
  }
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  if (FindLocked(t, info.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrFormat("worker mode '%s' is registered", info.name));
  }
  int next_wire = 1;
  for (const WorkerModeInfo& row : t.rows) {
    if (info.wire != 0 && row.wire == info.wire) {
      return absl::InvalidArgumentError(absl::StrFormat("worker mode '%s': wire number %d is %s's",
                                                        info.name, info.wire, row.name));
    }
    next_wire = std::max(next_wire, row.wire + 1);
  }
  if (info.wire == 0) info.wire = next_wire;
  t.rows.push_back(std::move(info));
  return absl::OkStatus();
}

std::vector<WorkerModeInfo> WorkerModes() {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return {t.rows.begin(), t.rows.end()};
}

std::vector<std::pair<std::string, WorkerMode>> WorkerModeChoices() {
  std::vector<std::pair<std::string, WorkerMode>> out;
  for (const WorkerModeInfo& row : WorkerModes())
    out.emplace_back(row.name, *FindWorkerMode(row.name));
  return out;
}

absl::Status CheckWorkerModeHints(WorkerMode m, std::string_view prediction) {
  const WorkerModeHints hints = m.info().hints;
  if (hints == WorkerModeHints::kIgnored && prediction != "none") {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' with workers.mode %s: the caching baselines use no prediction, "
                        "and this mode ignores hints (expected none)",
                        prediction, m.name()));
  }
  if (hints == WorkerModeHints::kRequired && prediction == "none") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'none' with workers.mode %s: the mode is fed by predictions (expected shadow, "
        "lookahead or random)",
        m.name()));
  }
  return absl::OkStatus();
}

std::string WorkerModeValues() {
  Table& t = TheTable();
  std::lock_guard<std::mutex> lock(t.mu);
  return ValuesLocked(t);
}

}  // namespace odmoe
