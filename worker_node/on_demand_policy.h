// workers.mode on_demand (the paper's worker): one slot (two when it computes
// several experts of a layer, k > G; a budget's room, up to 64, when one is
// set); hints' predicted experts are prefetched into free slots; a task's
// expert is loaded if not there, in place of the prefetch made for its
// position (a wrong prediction: a reload), else a free slot, else the
// prefetch needed furthest in the future; evicted after its task.
//
//   OnDemandPolicy p(/*several=*/false);
//   p.AutoSlots();                           // 1
//   std::optional<IdleLoad> next = p.NextLoad(state);   // a planned expert not loaded
//
// Thread-safety: as every SlotPolicy (slot_policy.h); no state of its own.
#pragma once

#include <algorithm>

#include "worker_node/slot_policy.h"

namespace odmoe {

class OnDemandPolicy : public SlotPolicy {
 public:
  /// `several`: a worker computes several experts of a layer (k > G).
  explicit OnDemandPolicy(bool several) : several_(several) {}

  int SlotsNeeded() const override { return 1; }
  // Two slots load the next expert while one computes.
  int AutoSlots() const override { return several_ ? 2 : 1; }
  // Extra slots prefetch further ahead.
  int SlotsInBudget(int room) const override { return std::min(room, 64); }
  bool Prefetches() const override { return true; }
  int Victim(const SlotState& state) const override { return FurthestPrefetch(state); }
  std::optional<IdleLoad> NextLoad(const SlotState& state) const override {
    const int free = state.FreeSlot();
    if (free < 0) return std::nullopt;
    return FirstMissingPlanned(state, free, /*evict=*/false);
  }

 private:
  bool several_;
};

}  // namespace odmoe
