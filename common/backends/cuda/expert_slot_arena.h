// A worker's device memory for experts: fixed slots, sized once by a memory
// budget, filled by asynchronous copies from pinned host memory so that
// loading the next expert overlaps computing the current one.
//
// The arena is plain C++ and backend-neutral: it keeps the slot table, picks
// slots, orders the work through a SlotDevice (backend/slot_device.h), and
// does the accounting. The SlotDevice does the device side; for CUDA
// (cuda_slot_device.h) that is one allocation for all slots, a dedicated copy
// stream, and two events per slot:
//
//   load(slot):     copy stream waits for release[slot]     (the last compute
//                   that read the slot is done with it), copies the expert,
//                   records ready[slot]
//   acquire(slot):  compute stream waits for ready[slot]     (exactly the
//                   event of this expert's load, nothing else)
//   release(slot):  compute stream records release[slot]    (after the ops
//                   that read the slot were queued)
// The host never waits in this cycle: eviction is bookkeeping, the next load
// into the slot is ordered behind the release event on the GPU.
//
//   ODMOE_ASSIGN_OR_RETURN(auto device, MakeCudaSlotDevice(cuda_backend));
//   // Slots for any expert: the largest (layers may store experts differently).
//   ExpertSlotArena::Options o{.expert_bytes = LargestPackedExpert(c), .memory_budget = 2 << 30};
//   ODMOE_ASSIGN_OR_RETURN(auto arena, ExpertSlotArena::Create(std::move(device), o));
//   ODMOE_ASSIGN_OR_RETURN(int next, arena->Load({layer, e1}, host.Expert(e1)));  // prefetch
//   ODMOE_ASSIGN_OR_RETURN(const void* w, arena->Acquire(cur));
//   RunExpertFfn(backend, ExpertPackLayout::For(c, layer).WeightsAt(w), x, scratch, y);
//   ODMOE_RETURN_IF_ERROR(arena->Release(cur));
//
// Host memory. The source of a load must stay valid and unchanged until the
// load is done (the copy runs after Load returns); the CUDA device requires
// it to be pinned: see PinnedExpertStore in cuda_slot_device.h for the
// pinned-copy strategy and why it is used rather than registering the mmap.
//
// Eviction. Load uses an empty slot when there is one, else the least
// recently used slot that is neither acquired nor kept resident (Keep);
// RESOURCE_EXHAUSTED when every slot is in use. Loading a key the arena
// already holds returns its slot without copying (a hit).
//
// Not thread-safe: one thread (the worker's executor) drives an arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/slot_device.h"

namespace odmoe {

/// One expert of one layer.
struct ExpertKey {
  int32_t layer = -1;
  int32_t expert = -1;
  bool operator==(const ExpertKey& o) const { return layer == o.layer && expert == o.expert; }
};

class ExpertSlotArena {
 public:
  struct Options {
    size_t expert_bytes = 0;     // bytes of one packed expert (> 0)
    uint64_t memory_budget = 0;  // device bytes the slots may use
    int max_slots = 0;           // 0: as many as the budget holds
  };

  struct Stats {
    int slots = 0;
    int held = 0;  // slots holding an expert (loaded or loading)
    int peak_held = 0;
    int acquired = 0;              // slots acquired and not yet released
    uint64_t bytes_reserved = 0;   // device memory of all slots
    uint64_t bytes_held = 0;       // held * expert_bytes
    uint64_t peak_bytes_held = 0;  // peak_held * expert_bytes
    uint64_t loads = 0, bytes_loaded = 0, hits = 0, evictions = 0;
  };

  /// Slot stride: expert_bytes rounded up to 256 bytes (every slot, and so
  /// every packed expert's parts, stays as aligned as the allocation).
  static size_t SlotStride(size_t expert_bytes);
  /// Slots that `options` give (0 when not even one fits).
  static int SlotsFor(const Options& options);

  /// INVALID_ARGUMENT for expert_bytes == 0 or max_slots < 0,
  /// RESOURCE_EXHAUSTED when the budget holds no slot (the message gives the
  /// sizes), or the device's allocation error.
  static absl::StatusOr<std::unique_ptr<ExpertSlotArena>> Create(std::unique_ptr<SlotDevice> device,
                                                                 const Options& options);

  int slots() const { return static_cast<int>(slots_.size()); }
  size_t expert_bytes() const { return expert_bytes_; }
  /// The slot holding `key` (loaded or loading), or -1.
  int Find(ExpertKey key) const;
  /// The key a slot holds ({-1, -1} when empty).
  ExpertKey KeyOf(int slot) const;

  /// Starts loading `key` from `host_src` (expert_bytes bytes) into a slot
  /// and returns it at once (or the slot already holding `key`).
  absl::StatusOr<int> Load(ExpertKey key, const void* host_src);
  /// Queues the compute stream's wait for the slot's load and returns the
  /// slot's device address. Acquire/Release pairs may nest.
  absl::StatusOr<const void*> Acquire(int slot);
  /// After the ops that read the slot were issued: records its release.
  absl::Status Release(int slot);
  /// Forgets the slot's contents (FAILED_PRECONDITION while acquired).
  absl::Status Evict(int slot);
  /// Keeps the slot resident (never chosen for eviction) or not.
  absl::Status Keep(int slot, bool keep);
  /// Blocks until the slot's load is done; returns its device time in
  /// seconds (for load-bandwidth accounting).
  absl::StatusOr<double> WaitLoaded(int slot);

  Stats stats() const;

 private:
  struct Slot {
    ExpertKey key;
    bool held = false;
    bool keep = false;
    int acquired = 0;
    uint64_t last_use = 0;  // arena clock at the last Load / Release
  };

  ExpertSlotArena(std::unique_ptr<SlotDevice> device, size_t expert_bytes, size_t stride)
      : device_(std::move(device)), expert_bytes_(expert_bytes), stride_(stride) {}
  absl::Status CheckSlot(int slot) const;
  /// An empty slot, else the least recently used evictable one, else -1.
  int PickSlot() const;

  std::unique_ptr<SlotDevice> device_;
  size_t expert_bytes_;
  size_t stride_;
  uint8_t* base_ = nullptr;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
  int held_ = 0, peak_held_ = 0, acquired_ = 0;
  uint64_t loads_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace odmoe
