// workers.mode resident (the "fully cached" reference deployment): every
// expert the worker is normally asked for (UsualExperts, worker_placement.h)
// is loaded at start into a slot of its own and never evicted; one more slot
// (when the budget has room, always without one) takes anything else it is
// asked for, when the schedule moves layers after a group failed. Hints are
// not used.
//
//   ResidentPolicy p(UsualExperts(config, placement));
//   p.Preload();       // the set, loaded pinned by WorkerCore::Create
//   p.AutoSlots();     // the set + 1
//
// Thread-safety: as every SlotPolicy (slot_policy.h); its set is fixed.
#pragma once

#include <utility>
#include <vector>

#include "worker_node/slot_policy.h"

namespace odmoe {

class ResidentPolicy : public SlotPolicy {
 public:
  explicit ResidentPolicy(std::vector<std::pair<int, int>> set) : set_(std::move(set)) {}

  int SlotsNeeded() const override { return static_cast<int>(set_.size()); }
  int AutoSlots() const override { return SlotsNeeded() + 1; }
  int SlotsInBudget(int room) const override {
    return room > SlotsNeeded() ? SlotsNeeded() + 1 : SlotsNeeded();
  }
  std::vector<std::pair<int, int>> Preload() const override { return set_; }
  // Only the spare slot is ever evicted (the others are pinned).
  int Victim(const SlotState& state) const override { return FurthestPrefetch(state); }

 private:
  std::vector<std::pair<int, int>> set_;
};

}  // namespace odmoe
