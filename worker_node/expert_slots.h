// A worker's device memory for experts: a fixed number of slots, each the
// size of one packed expert (model/expert_pack.h), allocated once from the
// backend. Loading packs an expert from the host copy (the mmapped GGUF) into
// a slot; evicting frees the slot. Nothing is allocated per token. An
// optional load-bandwidth cap emulates a slow link (set_load_bandwidth).
//
// The accounting is the worker's own evidence that it keeps its budget: how
// many experts it holds now and at most, and the bytes that means.
//
//   ODMOE_ASSIGN_OR_RETURN(ExpertSlots slots, ExpertSlots::Create(*model, *backend, 1));
//   int s = slots.FreeSlot();
//   ODMOE_ASSIGN_OR_RETURN(double seconds, slots.Load(s, layer, expert, /*prefetched=*/true));
//   RunExpertFfn(*backend, slots.weights(s), x, scratch, y);
//   slots.Evict(s);
//   slots.peak_held();   // 1
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "model/expert_pack.h"
#include "model/model_file.h"

namespace odmoe {

class ExpertSlots {
 public:
  struct Slot {
    bool loaded = false;
    int layer = -1;
    int expert = -1;
    bool prefetched = false;  // loaded from a hint, before its task came
    bool pinned = false;      // resident: never evicted
    std::chrono::steady_clock::time_point loaded_at;  // when the load finished
    uint64_t last_used = 0;   // Touch() counter: for least-recently-used eviction
  };

  static absl::StatusOr<ExpertSlots> Create(const ModelFile& model, Backend& backend, int slots);

  int size() const { return static_cast<int>(slots_.size()); }
  const Slot& slot(int i) const { return slots_[static_cast<size_t>(i)]; }
  /// The slot holding (layer, expert), or -1.
  int FindLoaded(int layer, int expert) const;
  /// An empty slot, or -1.
  int FreeSlot() const;

  /// Packs expert (layer, expert) into empty slot `slot`; returns the seconds
  /// it took. FAILED_PRECONDITION if the slot is not empty.
  absl::StatusOr<double> Load(int slot, int layer, int expert, bool prefetched,
                              bool pinned = false);
  void Evict(int slot);
  /// Marks a prefetched slot as claimed by its task.
  void ClearPrefetched(int slot) { slots_[static_cast<size_t>(slot)].prefetched = false; }
  /// Marks a slot as used now (for LeastRecentlyUsed).
  void Touch(int slot) { slots_[static_cast<size_t>(slot)].last_used = ++use_clock_; }
  /// The loaded, unpinned slot used longest ago, or -1.
  int LeastRecentlyUsed() const;

  /// EMULATION of a slow host-to-device link: every load takes at least
  /// expert_bytes / bytes_per_second (the caller's thread sleeps out the
  /// rest, as it would wait for a DMA). 0 = off.
  void set_load_bandwidth(uint64_t bytes_per_second) { load_bandwidth_ = bytes_per_second; }
  uint64_t load_bandwidth() const { return load_bandwidth_; }

  ExpertWeights weights(int slot) const { return layout_.WeightsAt(memory_[slot]->data()); }
  size_t expert_bytes() const { return layout_.total_bytes; }

  // ---- Accounting --------------------------------------------------------
  int held() const { return held_; }
  int peak_held() const { return peak_held_; }
  uint64_t bytes_held() const { return static_cast<uint64_t>(held_) * layout_.total_bytes; }
  uint64_t peak_bytes_held() const {
    return static_cast<uint64_t>(peak_held_) * layout_.total_bytes;
  }
  uint64_t bytes_reserved() const { return slots_.size() * layout_.total_bytes; }
  uint64_t loads() const { return loads_; }
  uint64_t bytes_loaded() const { return loads_ * layout_.total_bytes; }
  double load_seconds() const { return load_seconds_; }

 private:
  ExpertSlots(const ModelFile& model, Backend& backend, ExpertPackLayout layout)
      : model_(&model), backend_(&backend), layout_(layout) {}

  const ModelFile* model_;
  Backend* backend_;
  ExpertPackLayout layout_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<BackendBuffer>> memory_;
  std::vector<uint8_t> staging_;  // host packing buffer for device backends
  int held_ = 0;
  int peak_held_ = 0;
  uint64_t loads_ = 0;
  double load_seconds_ = 0;
  uint64_t use_clock_ = 0;
  uint64_t load_bandwidth_ = 0;
};

}  // namespace odmoe
