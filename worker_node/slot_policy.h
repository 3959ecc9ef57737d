// A worker's slot policy: which slot serves a task, what to evict, what a
// hint prefetches and what an idle moment admits. WorkerCore
// (worker_node/worker_core.h) loads, computes and counts; at each of these
// decisions it asks its policy, one object per worker, made from the
// registry below by the worker's mode (workers.mode, topology/worker_mode.h).
//
// The decisions, and who asks them:
//   sizing     SlotsNeeded / AutoSlots / SlotsInBudget / Preload: how many
//              slots the worker's budget must hold and uses, and the experts
//              loaded (pinned) once at start. WorkerCore::Create, once.
//   hints      Prefetches: whether the worker keeps hints' plans and loads
//              experts before their tasks come (from the plans, and on a
//              device the queued tasks' experts while one computes); false:
//              hints are counted and dropped. OnHint: a plan arrived.
//   a task     Victim: its expert is not loaded, no slot is free and no
//              prefetch was made for its position: the slot to evict.
//              OnTaskDone: the task computed (counts, recency).
//   idle       NextLoad: nothing to compute: one load to start (a prefetch
//              of a planned expert, or an admission), or none.
// What a mode's name means to the rest of the cluster (prediction use; a
// cache that keeps experts after their task) is its row in
// topology/worker_mode.h, not the policy's.
// Not slot policies, and so not here: mixed precision (a task's
// low_precision flag and a ranked hint's precision, decided by the main
// node's depth schedule; the worker loads the copy it is told) and graceful
// degradation (a task's degradable flag: computed with the prefetch made for
// its position); both are flags of a task that WorkerCore serves whatever
// the policy.
//
// Thread-safety (every policy): WorkerCore calls every method but the sizing
// ones with its mutex held (OnHint on the stream thread that delivered the
// hint, the others on its executor thread), so a policy keeps its state
// without a lock of its own; it must not block or call back into the core.
// The sizing methods are called in WorkerCore::Create before any thread
// starts. A policy is used by one worker.
//
// A new policy: a class (one header, worker_node/<name>_policy.h), its row
// in topology/worker_mode.cpp and its factory in
// worker_node/slot_policy_registry.cpp. Or, at run time (a test's policy):
//
//   class MruPolicy : public SlotPolicy {   // a cache evicting the most recently used
//    public:
//     explicit MruPolicy(int slots) : slots_(slots) {}
//     int SlotsNeeded() const override { return slots_; }
//     int Victim(const SlotState& s) const override {
//       return LowestScore(s, [&](int l, int e) {
//         return ~s.slots[s.FindLoaded(l, e)].last_used;   // the latest use scores lowest
//       });
//     }
//    private:
//     int slots_;
//   };
//   ODMOE_RETURN_IF_ERROR(RegisterSlotPolicy(
//       {.name = "mru_cache", .help = "evicts the most recently used",
//        .hints = WorkerModeHints::kIgnored, .keeps_experts = true},
//       [](const SlotPolicyContext& c) -> absl::StatusOr<std::unique_ptr<SlotPolicy>> {
//         return std::make_unique<MruPolicy>(c.cache_experts);
//       }));
//   WorkerCore::Options o;
//   ODMOE_ASSIGN_OR_RETURN(o.mode, FindWorkerMode("mru_cache"));   // or workers.mode: mru_cache
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "topology/worker_mode.h"
#include "worker_node/expert_utility.h"
#include "worker_node/worker_placement.h"

namespace odmoe {

/// A decode step: (request, token, layer).
using StepKey = std::tuple<uint64_t, uint32_t, uint32_t>;
/// An expert a hint plans on this worker at a position of a step.
struct PlannedExpert {
  uint32_t position = 0;
  int32_t expert = -1;
  bool low = false;  // mixed precision: from the low-precision copy
};
/// The worker's plans, per step, until each position's task is done.
using StepPlans = std::map<StepKey, std::vector<PlannedExpert>>;
/// The step and position a prefetch was made for.
struct PlanRef {
  StepKey key{};
  uint32_t position = 0;
  auto operator<=>(const PlanRef&) const = default;
};

/// What a policy sees of a slot.
struct SlotView {
  bool loaded = false;
  bool pinned = false;      // preloaded: never evicted
  bool prefetched = false;  // loaded from a hint, not yet claimed by its task
  int layer = -1, expert = -1;
  uint64_t last_used = 0;          // larger = used more recently (LRU)
  std::optional<PlanRef> planned;  // the live prefetch it holds
};

/// The worker's slots and plans at a decision.
struct SlotState {
  std::span<const SlotView> slots;
  const StepPlans& plans;
  /// An empty slot, or -1.
  int FreeSlot() const;
  /// The slot holding (layer, expert) in any precision, or -1.
  int FindLoaded(int layer, int expert) const;
};

/// A load an idle worker starts.
struct IdleLoad {
  int slot = -1;
  bool evict = false;  // the slot holds an expert to evict first
  int layer = -1, expert = -1;
  bool low = false;                 // from the low-precision copy
  std::optional<PlanRef> for_step;  // a prefetch for this step and position; none: an admission
};

class SlotPolicy {
 public:
  virtual ~SlotPolicy() = default;

  // ---- Sizing (WorkerCore::Create) ----------------------------------------
  /// Slots the worker needs (a budget that holds fewer is refused).
  virtual int SlotsNeeded() const = 0;
  /// Slots without a budget (memory_budget 0).
  virtual int AutoSlots() const { return SlotsNeeded(); }
  /// Slots with a budget that holds `room` (>= SlotsNeeded()).
  virtual int SlotsInBudget(int room) const { return SlotsNeeded(); }
  /// Experts loaded at start into slots of their own, never evicted.
  virtual std::vector<std::pair<int, int>> Preload() const { return {}; }

  // ---- Hints ---------------------------------------------------------------
  /// Whether hints' plans are kept and experts loaded before their tasks.
  virtual bool Prefetches() const { return false; }
  /// A hint planned `plan` (this worker's positions) for `key` (Prefetches()
  /// only). A corrected hint for the same step comes again.
  virtual void OnHint(const StepKey& key, std::span<const PlannedExpert> plan) {}

  // ---- Tasks ---------------------------------------------------------------
  /// A task's expert must load, no slot is free and none holds a prefetch
  /// for its position: the loaded slot to evict, or -1 (every slot pinned).
  virtual int Victim(const SlotState& state) const = 0;
  /// A task computed (layer, expert) successfully.
  virtual void OnTaskDone(int layer, int expert) {}

  // ---- Idle ----------------------------------------------------------------
  /// Nothing to compute: the next load to start, or none (Prefetches() only).
  virtual std::optional<IdleLoad> NextLoad(const SlotState& state) const { return std::nullopt; }
  /// Its score of (layer, expert) where it keeps one (the utility cache's
  /// utility); 0 otherwise.
  virtual int utility(int layer, int expert) const { return 0; }
};

// ---- Shared decisions (slot_policy.cpp) -------------------------------------
/// The unpinned slot whose prefetch is needed furthest in the future (the
/// latest step and position; with one slot, the only one): a prediction for
/// a later step, or one that came too late. A slot holding no prefetch (a
/// load started for a queued task) goes last. -1 if every slot is pinned.
int FurthestPrefetch(const SlotState& state);
/// The first planned expert (steps in order, positions as planned) that is
/// not loaded, as a prefetch into `slot` (evicting it first: `evict`).
std::optional<IdleLoad> FirstMissingPlanned(const SlotState& state, int slot, bool evict);
/// The loaded, unpinned slot with the lowest (planned, score, last_used), or
/// -1: a cache's victim by `score` (a slot planned for a pending step last).
int LowestScore(const SlotState& state,
                const std::function<uint64_t(int layer, int expert)>& score);

// ---- The registry ----------------------------------------------------------
/// What a factory gets.
struct SlotPolicyContext {
  const ModelConfig& config;
  WorkerPlacement placement;
  int cache_experts = 8;           // the cache modes' slots
  ExpertUtility::Options utility;  // utility_cache
};
using SlotPolicyFactory =
    std::function<absl::StatusOr<std::unique_ptr<SlotPolicy>>(const SlotPolicyContext&)>;

/// Registers a mode (its row: topology/worker_mode.h) and its policy.
/// Errors as RegisterWorkerMode's.
absl::Status RegisterSlotPolicy(WorkerModeInfo mode, SlotPolicyFactory create);
/// The policy of `mode`. FAILED_PRECONDITION for a mode no policy was
/// registered for (a mode table row without its factory); the factory's
/// errors (INVALID_ARGUMENT naming the setting) otherwise.
absl::StatusOr<std::unique_ptr<SlotPolicy>> CreateSlotPolicy(WorkerMode mode,
                                                             const SlotPolicyContext& context);

}  // namespace odmoe
