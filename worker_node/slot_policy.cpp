#include "worker_node/slot_policy.h"

namespace odmoe {

int SlotState::FreeSlot() const {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].loaded) return static_cast<int>(i);
  }
  return -1;
}

int SlotState::FindLoaded(int layer, int expert) const {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].loaded && slots[i].layer == layer && slots[i].expert == expert) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int FurthestPrefetch(const SlotState& state) {
  auto rank = [&](int i) {
    const std::optional<PlanRef>& p = state.slots[static_cast<size_t>(i)].planned;
    return p ? std::make_pair(true, *p) : std::make_pair(false, PlanRef{});
  };
  int victim = -1;
  for (int i = 0; i < static_cast<int>(state.slots.size()); ++i) {
    if (state.slots[static_cast<size_t>(i)].pinned) continue;
    if (victim < 0 || rank(i) > rank(victim)) victim = i;
  }
  return victim;
}

std::optional<IdleLoad> FirstMissingPlanned(const SlotState& state, int slot, bool evict) {
  for (const auto& [key, plan] : state.plans) {
    const int layer = static_cast<int>(std::get<2>(key));
    for (const PlannedExpert& planned : plan) {
      if (state.FindLoaded(layer, planned.expert) >= 0) continue;
      return IdleLoad{.slot = slot,
                      .evict = evict,
                      .layer = layer,
                      .expert = planned.expert,
                      .low = planned.low,
                      .for_step = PlanRef{key, planned.position}};
    }
  }
  return std::nullopt;
}

int LowestScore(const SlotState& state,
                const std::function<uint64_t(int layer, int expert)>& score) {
  auto rank = [&](const SlotView& s) {
    return std::make_tuple(s.planned.has_value(), score(s.layer, s.expert), s.last_used);
  };
  int victim = -1;
  for (int i = 0; i < static_cast<int>(state.slots.size()); ++i) {
    const SlotView& s = state.slots[static_cast<size_t>(i)];
    if (!s.loaded || s.pinned) continue;
    if (victim < 0 || rank(s) < rank(state.slots[static_cast<size_t>(victim)])) victim = i;
  }
  return victim;
}

}  // namespace odmoe
