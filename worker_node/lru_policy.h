// workers.mode lru_cache (the caching baseline of Mixtral-Offloading-like
// systems): cache_experts slots; experts stay after their task; a miss evicts
// the least recently used (ExpertSlots' use clock). No prefetch: hints are
// dropped (the topology refuses a prediction mode with it).
//
//   LruPolicy p(/*slots=*/8);
//   int victim = p.Victim(state);   // the loaded, unpinned slot used longest ago
//
// Thread-safety: as every SlotPolicy (slot_policy.h); no state of its own.
#pragma once

#include "worker_node/slot_policy.h"

namespace odmoe {

class LruPolicy : public SlotPolicy {
 public:
  explicit LruPolicy(int slots) : slots_(slots) {}

  int SlotsNeeded() const override { return slots_; }
  int Victim(const SlotState& state) const override {
    int victim = -1;
    for (int i = 0; i < static_cast<int>(state.slots.size()); ++i) {
      const SlotView& s = state.slots[static_cast<size_t>(i)];
      if (!s.loaded || s.pinned) continue;
      if (victim < 0 || s.last_used < state.slots[static_cast<size_t>(victim)].last_used) {
        victim = i;
      }
    }
    return victim;
  }

 private:
  int slots_;
};

}  // namespace odmoe
