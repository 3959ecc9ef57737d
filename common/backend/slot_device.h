// The device side of a worker's expert slots, for a backend whose memory is
// not host memory (a GPU): a fixed reservation of slots, a pinned host area
// loads are copied from, asynchronous copies on a queue of their own, and two
// fences per slot that order them against the backend's compute queue:
//
//   load(slot):     copy queue waits for release[slot]   (the last compute
//                   that read the slot is done with it), copies the expert,
//                   records ready[slot]
//   acquire(slot):  compute queue waits for ready[slot]  (exactly the fence
//                   of this expert's load, nothing else)
//   release(slot):  compute queue records release[slot] (after the ops that
//                   read the slot were queued)
//
// The host never waits in this cycle; WaitLoadDone is for accounting and for
// reusing a host source. Users: ExpertSlotArena (backends/cuda) and the
// worker's ExpertSlots (worker_node/expert_slots.h). A backend family offers
// one through BackendFactory::slot_device (backends/backend_registry.h);
// CUDA's is MakeCudaSlotDevice (backends/cuda/cuda_slot_device.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace odmoe {

/// Bytes between consecutive slots or pinned host entries holding experts of
/// `expert_bytes`: rounded up to 256, so every packed expert (and its parts)
/// stays as aligned as its allocation.
inline size_t ExpertSlotStride(size_t expert_bytes) {
  constexpr size_t kAlignment = 256;
  return (expert_bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// Slot indices are in [0, slots). One thread drives a device.
class SlotDevice {
 public:
  virtual ~SlotDevice() = default;
  /// "cuda:0", ...
  virtual std::string name() const = 0;
  /// Allocates device memory for `slots` slots of `slot_bytes` (one call,
  /// before any other); returns the base address.
  virtual absl::StatusOr<uint8_t*> Reserve(int slots, size_t slot_bytes) = 0;
  /// Host memory that loads may be queued from (pinned for CUDA: a copy from
  /// pageable memory would be staged by the driver and could block). One
  /// call; the device owns it. RESOURCE_EXHAUSTED when it cannot be had.
  virtual absl::StatusOr<uint8_t*> ReserveHost(size_t bytes) = 0;
  /// Queues: wait for the slot's release fence, copy `bytes` from host `src`
  /// to `dst`, record the slot's ready fence. Does not wait for the copy.
  virtual absl::Status QueueLoad(int slot, void* dst, const void* src, size_t bytes) = 0;
  /// Makes the compute queue wait for the slot's ready fence.
  virtual absl::Status ComputeWaitForLoad(int slot) = 0;
  /// Records the slot's release fence on the compute queue.
  virtual absl::Status RecordRelease(int slot) = 0;
  /// Blocks the calling thread until the slot's last load is done.
  virtual absl::Status WaitLoadDone(int slot) = 0;
  /// Seconds the slot's last load took on the device (after WaitLoadDone).
  virtual absl::StatusOr<double> LoadSeconds(int slot) = 0;
};

}  // namespace odmoe
