// workers.mode utility_cache (MoE-SpAc's utility-driven cache): cache_experts
// slots; experts stay after their task; every expert is scored by how its
// hinted frequency changes (ExpertUtility, worker_node/expert_utility.h).
//   a hint      is observed, and its planned experts are prefetched like
//               on_demand's: into a free slot, or in place of the lowest
//               utility that no pending step is planned on;
//   a miss      evicts the lowest utility first (a slot planned for a
//               pending step last; ties: the least recently used);
//   idle        admits one hot expert that is not loaded, the hottest first,
//               into a free slot or in place of a colder one (never of a
//               planned prefetch);
//   a prefetch  its step no longer needs stays (its utility decides).
//
//   UtilityPolicy p(/*slots=*/6, /*n_layer=*/32, /*n_expert=*/8, {.window = 8});
//   p.OnHint({1, 17, 4}, plan);                  // request 1, token 17, layer 4
//   std::optional<IdleLoad> next = p.NextLoad(state);
//   p.utility(4, 3);
//
// Thread-safety: as every SlotPolicy (slot_policy.h): the utilities are
// written by OnHint (a stream thread) and read by Victim and NextLoad (the
// executor thread), all under the worker's mutex.
#pragma once

#include <vector>

#include "worker_node/expert_utility.h"
#include "worker_node/slot_policy.h"

namespace odmoe {

class UtilityPolicy : public SlotPolicy {
 public:
  UtilityPolicy(int slots, int n_layer, int n_expert, ExpertUtility::Options options)
      : slots_(slots), utility_(n_layer, n_expert, options) {}

  int SlotsNeeded() const override { return slots_; }
  bool Prefetches() const override { return true; }
  void OnHint(const StepKey& key, std::span<const PlannedExpert> plan) override {
    std::vector<int32_t> experts;
    for (const PlannedExpert& e : plan) experts.push_back(e.expert);
    utility_.Observe(static_cast<int>(std::get<2>(key)), {std::get<0>(key), std::get<1>(key)},
                     experts);
  }
  int Victim(const SlotState& state) const override {
    return LowestScore(state, [this](int layer, int expert) {
      return static_cast<uint64_t>(utility_.utility(layer, expert));
    });
  }
  std::optional<IdleLoad> NextLoad(const SlotState& state) const override {
    int slot = state.FreeSlot();
    bool evict = false;
    if (slot < 0) {
      // A full cache makes room for a planned expert that is not loaded: the
      // lowest utility that no pending step is planned on.
      const int victim = Victim(state);
      if (victim >= 0 && !state.slots[static_cast<size_t>(victim)].planned &&
          FirstMissingPlanned(state, victim, true)) {
        slot = victim;
        evict = true;
      }
    }
    if (slot >= 0) {
      if (std::optional<IdleLoad> prefetch = FirstMissingPlanned(state, slot, evict)) {
        return prefetch;
      }
    }
    return Admission(state);
  }
  int utility(int layer, int expert) const override { return utility_.utility(layer, expert); }

 private:
  // The hottest expert that is not loaded, into a free slot or in place of a
  // colder one that holds no prefetch (one at a time: tasks may be waiting).
  std::optional<IdleLoad> Admission(const SlotState& state) const {
    for (const auto& [layer, expert] : utility_.Hot()) {
      if (state.FindLoaded(layer, expert) >= 0) continue;
      int slot = state.FreeSlot();
      if (slot >= 0)
        return IdleLoad{.slot = slot, .layer = layer, .expert = expert, .for_step = std::nullopt};
      slot = Victim(state);
      if (slot < 0) return std::nullopt;
      const SlotView& victim = state.slots[static_cast<size_t>(slot)];
      if (victim.planned ||
          utility_.utility(victim.layer, victim.expert) >= utility_.utility(layer, expert)) {
        return std::nullopt;
      }
      return IdleLoad{
          .slot = slot, .evict = true, .layer = layer, .expert = expert, .for_step = std::nullopt};
    }
    return std::nullopt;
  }

  int slots_;
  ExpertUtility utility_;
};

}  // namespace odmoe
