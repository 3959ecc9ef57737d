// A worker's device memory for experts: a fixed number of slots, each the
// size of the largest packed expert of the model (model/expert_pack.h; layers
// may store their experts in different types), allocated once. Each expert is
// packed into its slot, and computed, in its own layer's layout. Nothing is
// allocated per token. Evicting is bookkeeping.
//
// Two ways to load, chosen by the backend:
//   * host memory (CPU): Load packs the expert from the mmapped GGUF straight
//     into the slot and returns when it is there. An optional load-bandwidth
//     cap emulates a slow link (set_load_bandwidth).
//   * a device (GPU, through a SlotDevice: backend/slot_device.h): at start
//     the experts this worker is normally asked for (`host_set`) are packed
//     once into pinned host memory; Load queues one asynchronous copy of the
//     packed expert on the device's copy queue and returns at once; Acquire
//     makes the compute queue wait for exactly that copy and Release lets the
//     next load into the slot start after the compute that read it. An expert
//     outside the set is packed into one of two pinned staging entries first.
//     WaitLoaded blocks until a slot's copy is done (accounting, stall).
//
// The accounting is the worker's own evidence that it keeps its budget: how
// many experts it holds now and at most, and the bytes that means (a held
// expert occupies a whole slot: held x slot_bytes). Loads count the bytes of
// the experts actually moved.
//
//   ODMOE_ASSIGN_OR_RETURN(ExpertSlots slots, ExpertSlots::Create(*model, *backend, 1));
//   int s = slots.FreeSlot();
//   ODMOE_RETURN_IF_ERROR(slots.Load(s, layer, expert, /*prefetched=*/true));
//   ODMOE_ASSIGN_OR_RETURN(auto done, slots.WaitLoaded(s));     // optional
//   ODMOE_ASSIGN_OR_RETURN(ExpertWeights w, slots.Acquire(s));
//   RunExpertFfn(*backend, w, x, scratch, y);
//   ODMOE_RETURN_IF_ERROR(slots.Release(s));
//   slots.Evict(s);
//   slots.peak_held();   // 1
//
// A miss may load in FIRM's sub-expert units instead (gate, up, down; the
// biases, where the architecture has them, travel with the gate): LoadStreamed
// starts it, and AcquireUnit(s, u) waits for unit u only (on the host: sleeps
// out the emulated link until that unit has arrived; on a device: queues the
// unit's copy and makes the compute queue wait for it), so the gate and up
// products run while the down matrix is still moving:
//   ODMOE_RETURN_IF_ERROR(slots.LoadStreamed(s, layer, expert));
//   for (int u = 0; u < kExpertFfnStages; ++u) {
//     ODMOE_ASSIGN_OR_RETURN(ExpertWeights w, slots.AcquireUnit(s, u, &waited));
//     RunExpertFfnStage(*backend, static_cast<ExpertFfnStage>(u), w, x, scratch, y);
//   }
//   ODMOE_RETURN_IF_ERROR(slots.Release(s));
//
// With a low-precision copy of the model (Create's `low_model`: DyMoE's mixed
// precision, workers.mixed_precision) an expert may be loaded from it instead
// (`low`, Slot::low): fewer bytes, its own layout; a slot holds an expert in
// one precision only (a high-precision copy serves a low-precision task too:
// the worker's rule).
#pragma once

#include <array>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/slot_device.h"
#include "model/expert_pack.h"
#include "model/model_file.h"

namespace odmoe {

class ExpertSlots {
 public:
  struct Slot {
    bool loaded = false;
    int layer = -1;
    int expert = -1;
    size_t bytes = 0;         // the packed expert's bytes (its layer's layout)
    bool prefetched = false;  // loaded from a hint, before its task came
    bool pinned = false;      // resident: never evicted
    bool ready = false;       // the load is known to be complete (loaded_at is final)
    std::chrono::steady_clock::time_point issued_at;  // when the load was started
    std::chrono::steady_clock::time_point loaded_at;  // when the load finished
    int64_t issued_wall_us = 0;                       // issued_at on the wall clock (trace spans)
    uint64_t last_used = 0;  // Touch() counter: for least-recently-used eviction (slot_policy.h)
    // LoadStreamed: the units queued so far (device), when each unit has
    // arrived (host emulation), and where the device copies read from.
    bool streamed = false;
    int units_queued = 0;
    std::array<std::chrono::steady_clock::time_point, 3> unit_ready{};
    const uint8_t* stream_src = nullptr;
    bool low = false;  // loaded from the low-precision copy
  };
  /// Sub-expert units of a streamed load: unit 0 is the gate (and every
  /// bias), 1 the up, 2 the down matrix.
  static constexpr int kUnits = 3;
  using ExpertId = std::pair<int, int>;  // (layer, expert)

  /// `device`: null for a backend whose memory is host memory, else the
  /// backend's SlotDevice (CreateSlotDevice in backends/backend_registry.h);
  /// `host_set`: with a device, the experts to keep packed in pinned host
  /// memory (others are staged when asked for).
  static absl::StatusOr<ExpertSlots> Create(const ModelFile& model, Backend& backend, int slots,
                                            std::unique_ptr<SlotDevice> device = nullptr,
                                            const std::vector<ExpertId>& host_set = {},
                                            const ModelFile* low_model = nullptr);

  int size() const { return static_cast<int>(slots_.size()); }
  const Slot& slot(int i) const { return slots_[static_cast<size_t>(i)]; }
  /// The slot holding (layer, expert), or -1.
  int FindLoaded(int layer, int expert) const;
  /// An empty slot, or -1.
  int FreeSlot() const;

  /// Starts loading expert (layer, expert) into empty slot `slot` (on a host
  /// backend: loads it). FAILED_PRECONDITION if the slot is not empty.
  absl::Status Load(int slot, int layer, int expert, bool prefetched, bool pinned = false,
                    bool low = false);
  /// Starts loading expert (layer, expert) into empty slot `slot` in its
  /// three units, in order, and returns at once (on the host, the emulated
  /// link delivers unit u after the bytes of units 0..u; without emulation
  /// every unit is there at once). Counted as one load.
  absl::Status LoadStreamed(int slot, int layer, int expert, bool low = false);
  /// The slot's weights once unit `unit` of its streamed load is there, for
  /// compute queued next that reads only units 0..unit (host: blocks until
  /// it has arrived and adds the seconds waited to *waited; device: queues
  /// the copies of the units up to it and makes the compute queue wait for
  /// them). For a slot loaded whole: Acquire.
  absl::StatusOr<ExpertWeights> AcquireUnit(int slot, int unit, double* waited);
  /// Blocks until the slot's load is complete; returns when it completed.
  absl::StatusOr<std::chrono::steady_clock::time_point> WaitLoaded(int slot);
  /// The slot's weights for compute queued next (the compute waits for the
  /// slot's load), and the end of that use (after the compute was queued).
  absl::StatusOr<ExpertWeights> Acquire(int slot);
  absl::Status Release(int slot);
  void Evict(int slot);
  /// Marks a prefetched slot as claimed by its task.
  void ClearPrefetched(int slot) { slots_[static_cast<size_t>(slot)].prefetched = false; }
  /// Marks a slot as used now (Slot::last_used: the slot policies' recency).
  void Touch(int slot) { slots_[static_cast<size_t>(slot)].last_used = ++use_clock_; }

  /// EMULATION of a slow host-to-device link: every load takes at least
  /// (its packed bytes) / bytes_per_second (the caller's thread sleeps out
  /// the rest, as it would wait for a DMA). 0 = off.
  void set_load_bandwidth(uint64_t bytes_per_second) { load_bandwidth_ = bytes_per_second; }
  uint64_t load_bandwidth() const { return load_bandwidth_; }

  /// Bytes of one slot: the largest packed expert of the model.
  size_t slot_bytes() const { return slot_bytes_; }
  /// Bytes of a packed expert of `layer` (from the low-precision copy: `low`).
  size_t expert_bytes(int layer, bool low = false) const { return Layout(layer, low).total_bytes; }
  /// A low-precision copy was given.
  bool has_low() const { return low_model_ != nullptr; }
  /// Loads are asynchronous copies through a SlotDevice.
  bool device() const { return device_ != nullptr; }
  /// Pinned host bytes holding packed experts (device path; 0 otherwise).
  uint64_t pinned_host_bytes() const { return pinned_host_bytes_; }

  // ---- Accounting --------------------------------------------------------
  int held() const { return held_; }
  int peak_held() const { return peak_held_; }
  uint64_t bytes_held() const { return static_cast<uint64_t>(held_) * slot_bytes_; }
  uint64_t peak_bytes_held() const { return static_cast<uint64_t>(peak_held_) * slot_bytes_; }
  uint64_t bytes_reserved() const { return slots_.size() * slot_bytes_; }
  uint64_t loads() const { return loads_; }
  /// Counts every load and eviction: what the slots hold changed when it did.
  uint64_t changes() const { return changes_; }
  uint64_t bytes_loaded() const { return bytes_loaded_; }
  /// Seconds loads took (device time on the device path, once waited for).
  double load_seconds() const { return load_seconds_; }

 private:
  // The byte ranges (offset, bytes) of a unit of a packed expert of `layer`.
  std::vector<std::pair<size_t, size_t>> UnitRanges(int layer, bool low, int unit) const;
  const ExpertPackLayout& Layout(int layer, bool low) const {
    return (low ? low_layouts_ : layouts_)[static_cast<size_t>(layer)];
  }
  const ModelFile& Source(bool low) const { return low ? *low_model_ : *model_; }
  // Checks (slot, layer, expert) for a load; the packed expert's host source
  // on a device (its pinned copy, or a staging entry it is packed into).
  absl::Status CheckLoad(int slot, int layer, int expert, bool low) const;
  absl::StatusOr<const uint8_t*> DeviceSource(int slot, int layer, int expert, bool low);
  // Device: queues the copies of a streamed slot's units up to `through`
  // that are not queued yet, in order.
  absl::Status QueueUnits(int slot, int through);
  // Marks a slot loaded (accounting).
  Slot& MarkLoaded(int slot, int layer, int expert, bool low,
                   std::chrono::steady_clock::time_point t0, int64_t t0_wall);

  ExpertSlots(const ModelFile& model, Backend& backend)
      : model_(&model),
        backend_(&backend),
        layouts_(LayerPackLayouts(model.config())),
        slot_bytes_(LargestPackedExpert(model.config())) {}

  const ModelFile* model_;
  Backend* backend_;
  std::vector<ExpertPackLayout> layouts_;  // per layer
  const ModelFile* low_model_ = nullptr;       // the low-precision copy (may be null)
  std::vector<ExpertPackLayout> low_layouts_;  // its layouts, per layer
  size_t slot_bytes_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<BackendBuffer>> memory_;  // host path: one buffer per slot
  std::vector<uint8_t*> slot_data_;                     // each slot's memory
  // Device path.
  std::unique_ptr<SlotDevice> device_;
  std::map<ExpertId, uint8_t*> host_copy_;    // packed experts in pinned memory
  uint8_t* staging_[2] = {nullptr, nullptr};  // pinned entries for other experts
  int staging_user_[2] = {-1, -1};            // the slot last loaded from each
  int next_staging_ = 0;
  uint64_t pinned_host_bytes_ = 0;
  int held_ = 0;
  int peak_held_ = 0;
  uint64_t loads_ = 0;
  uint64_t changes_ = 0;
  uint64_t bytes_loaded_ = 0;
  double load_seconds_ = 0;
  uint64_t use_clock_ = 0;
  uint64_t load_bandwidth_ = 0;
};

}  // namespace odmoe
