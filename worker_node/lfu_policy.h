// workers.mode lfu_cache: cache_experts slots; experts stay after their task;
// a miss evicts the least often used (tasks computed per expert since start;
// ties: the least recently used). No prefetch: hints are dropped (the
// topology refuses a prediction mode with it).
//
//   LfuPolicy p(/*slots=*/8, /*n_layer=*/32, /*n_expert=*/8);
//   p.OnTaskDone(/*layer=*/4, /*expert=*/3);   // counted
//   int victim = p.Victim(state);
//
// Thread-safety: as every SlotPolicy (slot_policy.h): its counts are written
// (OnTaskDone) and read (Victim) under the worker's mutex, on its executor
// thread.
#pragma once

#include <cstdint>
#include <vector>

#include "worker_node/slot_policy.h"

namespace odmoe {

class LfuPolicy : public SlotPolicy {
 public:
  LfuPolicy(int slots, int n_layer, int n_expert)
      : slots_(slots),
        n_expert_(n_expert),
        uses_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert), 0) {}

  int SlotsNeeded() const override { return slots_; }
  int Victim(const SlotState& state) const override {
    return LowestScore(state, [this](int layer, int expert) { return uses(layer, expert); });
  }
  void OnTaskDone(int layer, int expert) override {
    if (const size_t i = Index(layer, expert); i < uses_.size()) ++uses_[i];
  }
  /// Tasks computed with (layer, expert) so far.
  uint64_t uses(int layer, int expert) const {
    const size_t i = Index(layer, expert);
    return i < uses_.size() ? uses_[i] : 0;
  }

 private:
  size_t Index(int layer, int expert) const {
    if (layer < 0 || expert < 0 || expert >= n_expert_) return uses_.size();
    return static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) +
           static_cast<size_t>(expert);
  }

  int slots_;
  int n_expert_;
  std::vector<uint64_t> uses_;  // per (layer, expert)
};

}  // namespace odmoe
