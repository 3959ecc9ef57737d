// The CUDA side of expert loading: the SlotDevice of ExpertSlotArena
// (expert_slot_arena.h) on a CudaBackend, and the pinned host copy of the
// experts it loads from.
//
//   // At start: the host copy of this worker's experts, packed and pinned
//   // (entries of the largest expert: layers may store experts differently).
//   const size_t entry = LargestPackedExpert(model.config());
//   ODMOE_ASSIGN_OR_RETURN(PinnedExpertStore host, PinnedExpertStore::Create(n_mine, entry));
//   for (int i = 0; i < n_mine; ++i) {
//     PackExpert(model.Expert(l[i], e[i]), ExpertPackLayout::For(model.config(), l[i]),
//                host.entry(i));
//   }
//   // The device arena, sized by the worker's budget.
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<SlotDevice> dev, MakeCudaSlotDevice(backend));
//   ODMOE_ASSIGN_OR_RETURN(auto arena, ExpertSlotArena::Create(std::move(dev),
//                          {.expert_bytes = entry, .memory_budget = budget}));
//   ODMOE_ASSIGN_OR_RETURN(int slot, arena->Load({l[3], e[3]}, host.entry(3)));
//
// ---- Pinned memory: a pinned copy, not a registered mmap -----------------
// The host copy is a cudaHostAlloc'ed buffer into which the worker packs the
// experts it may be asked for (model/expert_pack.h layout), once, at start.
// Why not cudaHostRegister on the mmapped GGUF file:
//   * One DMA per expert. A packed expert is one contiguous range, copied by
//     one cudaMemcpyAsync at the copy engine's full rate; in the file an
//     expert is three slices of three stacked tensors, and the slot layout
//     (64-byte aligned parts) differs from the file's anyway.
//   * Only what this worker needs is locked. Registering pins every page of
//     the range for the process's life: the whole model file (or a
//     hand-computed subset of ranges) instead of the worker's own experts.
//   * It works everywhere. The model is mapped read-only; registering it
//     needs cudaHostRegisterReadOnly, which not every platform supports
//     (cudaDevAttrHostRegisterReadOnlySupported), and pinning file-backed
//     page-cache pages is refused by some kernels and filesystems.
// The cost is host RAM for the pinned copy; the file's page-cache pages are
// clean and the kernel may drop them once packed.
//
// QueueLoad rejects a source that is not pinned (INVALID_ARGUMENT): from
// pageable memory the driver stages the copy through its own buffer and the
// call may block, which would silently defeat the overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cuda_resources.h"
#include "expert_slot_arena.h"

namespace odmoe {

/// `count` experts of `entry_bytes` each in one pinned host allocation
/// (entries 256-byte aligned).
class PinnedExpertStore {
 public:
  /// INVALID_ARGUMENT for count < 1 or entry_bytes == 0; the allocation's
  /// error (RESOURCE_EXHAUSTED, or UNAVAILABLE without a GPU) otherwise.
  static absl::StatusOr<PinnedExpertStore> Create(int count, size_t entry_bytes);

  int count() const { return count_; }
  size_t entry_bytes() const { return entry_bytes_; }
  size_t bytes() const { return buffer_.size(); }
  /// Entry i (0 <= i < count), entry_bytes writable bytes.
  uint8_t* entry(int i) const {
    return static_cast<uint8_t*>(buffer_.data()) + static_cast<size_t>(i) * stride_;
  }

 private:
  cuda::PinnedHostBuffer buffer_;
  int count_ = 0;
  size_t entry_bytes_ = 0;
  size_t stride_ = 0;
};

/// The SlotDevice of a CUDA backend: slots in its device memory, loads on a
/// copy stream of its own, fences as events against the backend's stream.
/// INVALID_ARGUMENT when `backend` is not a CudaBackend. The backend must
/// outlive the device.
absl::StatusOr<std::unique_ptr<SlotDevice>> MakeCudaSlotDevice(Backend& backend);

}  // namespace odmoe
