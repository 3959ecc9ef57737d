#include "expert_slot_arena.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {

size_t ExpertSlotArena::SlotStride(size_t expert_bytes) { return ExpertSlotStride(expert_bytes); }

int ExpertSlotArena::SlotsFor(const Options& options) {
  if (options.expert_bytes == 0) return 0;
  const uint64_t fit = options.memory_budget / SlotStride(options.expert_bytes);
  const uint64_t cap = options.max_slots > 0 ? static_cast<uint64_t>(options.max_slots) : fit;
  return static_cast<int>(std::min<uint64_t>({fit, cap, uint64_t{1} << 20}));
}

absl::StatusOr<std::unique_ptr<ExpertSlotArena>> ExpertSlotArena::Create(
    std::unique_ptr<SlotDevice> device, const Options& options) {
  if (device == nullptr) return absl::InvalidArgumentError("expert arena: no device");
  if (options.expert_bytes == 0 || options.max_slots < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expert arena: bad options (expert_bytes %d, max_slots %d)",
                        options.expert_bytes, options.max_slots));
  }
  const int slots = SlotsFor(options);
  const size_t stride = SlotStride(options.expert_bytes);
  if (slots < 1) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "expert arena on %s: a memory budget of %d bytes holds no expert slot of %d bytes",
        device->name(), options.memory_budget, stride));
  }
  std::unique_ptr<ExpertSlotArena> arena(
      new ExpertSlotArena(std::move(device), options.expert_bytes, stride));
  ODMOE_ASSIGN_OR_RETURN(arena->base_, arena->device_->Reserve(slots, stride));
  arena->slots_.resize(static_cast<size_t>(slots));
  return arena;
}

absl::Status ExpertSlotArena::CheckSlot(int slot) const {
  if (slot < 0 || slot >= slots()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expert arena: slot %d out of range [0, %d)", slot, slots()));
  }
  return absl::OkStatus();
}

int ExpertSlotArena::Find(ExpertKey key) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].held && slots_[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

ExpertKey ExpertSlotArena::KeyOf(int slot) const {
  if (!CheckSlot(slot).ok() || !slots_[static_cast<size_t>(slot)].held) return ExpertKey{};
  return slots_[static_cast<size_t>(slot)].key;
}

int ExpertSlotArena::PickSlot() const {
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.held) return static_cast<int>(i);
    if (s.keep || s.acquired > 0) continue;
    if (best < 0 || s.last_use < slots_[static_cast<size_t>(best)].last_use) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

absl::StatusOr<int> ExpertSlotArena::Load(ExpertKey key, const void* host_src) {
  if (const int held = Find(key); held >= 0) {
    ++hits_;
    slots_[static_cast<size_t>(held)].last_use = ++clock_;
    return held;
  }
  if (host_src == nullptr) return absl::InvalidArgumentError("expert arena: null host source");
  const int slot = PickSlot();
  if (slot < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("expert arena: all %d slots are in use; cannot load expert %d of layer %d",
                        slots(), key.expert, key.layer));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.held) {
    ++evictions_;
    --held_;
    s = Slot{};
  }
  ODMOE_RETURN_IF_ERROR(device_->QueueLoad(slot, base_ + static_cast<size_t>(slot) * stride_,
                                           host_src, expert_bytes_));
  s.key = key;
  s.held = true;
  s.last_use = ++clock_;
  ++held_;
  peak_held_ = std::max(peak_held_, held_);
  ++loads_;
  return slot;
}

absl::StatusOr<const void*> ExpertSlotArena::Acquire(int slot) {
  ODMOE_RETURN_IF_ERROR(CheckSlot(slot));
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.held) {
    return absl::FailedPreconditionError(
        absl::StrFormat("expert arena: slot %d holds no expert", slot));
  }
  ODMOE_RETURN_IF_ERROR(device_->ComputeWaitForLoad(slot));
  if (s.acquired++ == 0) ++acquired_;
  return static_cast<const void*>(base_ + static_cast<size_t>(slot) * stride_);
}

absl::Status ExpertSlotArena::Release(int slot) {
  ODMOE_RETURN_IF_ERROR(CheckSlot(slot));
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.acquired == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("expert arena: slot %d released but not acquired", slot));
  }
  ODMOE_RETURN_IF_ERROR(device_->RecordRelease(slot));
  if (--s.acquired == 0) --acquired_;
  s.last_use = ++clock_;
  return absl::OkStatus();
}

absl::Status ExpertSlotArena::Evict(int slot) {
  ODMOE_RETURN_IF_ERROR(CheckSlot(slot));
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.acquired > 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("expert arena: slot %d is acquired and cannot be evicted", slot));
  }
  if (s.held) {
    ++evictions_;
    --held_;
  }
  s = Slot{};
  return absl::OkStatus();
}

absl::Status ExpertSlotArena::Keep(int slot, bool keep) {
  ODMOE_RETURN_IF_ERROR(CheckSlot(slot));
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.held) {
    return absl::FailedPreconditionError(
        absl::StrFormat("expert arena: slot %d holds no expert to keep", slot));
  }
  s.keep = keep;
  return absl::OkStatus();
}

absl::StatusOr<double> ExpertSlotArena::WaitLoaded(int slot) {
  ODMOE_RETURN_IF_ERROR(CheckSlot(slot));
  if (!slots_[static_cast<size_t>(slot)].held) {
    return absl::FailedPreconditionError(
        absl::StrFormat("expert arena: slot %d holds no expert", slot));
  }
  ODMOE_RETURN_IF_ERROR(device_->WaitLoadDone(slot));
  return device_->LoadSeconds(slot);
}

ExpertSlotArena::Stats ExpertSlotArena::stats() const {
  Stats st;
  st.slots = slots();
  st.held = held_;
  st.peak_held = peak_held_;
  st.acquired = acquired_;
  st.bytes_reserved = static_cast<uint64_t>(slots()) * stride_;
  st.bytes_held = static_cast<uint64_t>(held_) * expert_bytes_;
  st.peak_bytes_held = static_cast<uint64_t>(peak_held_) * expert_bytes_;
  st.loads = loads_;
  st.bytes_loaded = loads_ * expert_bytes_;
  st.hits = hits_;
  st.evictions = evictions_;
  return st;
}

}  // namespace odmoe
