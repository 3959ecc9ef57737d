#include "worker_node/expert_slots.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cluster/trace.h"
#include "util/logging.h"
#include "util/mmap_file.h"
#include "util/status_macros.h"
#include "util/step_progress.h"

namespace odmoe {
namespace {

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace

absl::StatusOr<ExpertSlots> ExpertSlots::Create(const ModelFile& model, Backend& backend, int slots,
                                                std::unique_ptr<SlotDevice> device,
                                                const std::vector<ExpertId>& host_set,
                                                const ModelFile* low_model) {
  if (slots < 1) return absl::InvalidArgumentError("a worker needs at least one expert slot");
  ExpertSlots s(model, backend);
  if (low_model != nullptr) {
    const ModelConfig& a = model.config();
    const ModelConfig& b = low_model->config();
    if (a.n_layer != b.n_layer || a.n_expert != b.n_expert || a.n_embd != b.n_embd ||
        a.n_ff != b.n_ff) {
      return absl::InvalidArgumentError(
          "the low-precision copy is not a copy of the worker's model (its shape differs)");
    }
    s.low_model_ = low_model;
    s.low_layouts_ = LayerPackLayouts(b);
    s.slot_bytes_ = std::max(s.slot_bytes_, LargestPackedExpert(b));
  }
  const size_t stride = ExpertSlotStride(s.slot_bytes_);
  if (device == nullptr) {
    // The slots are the backend's own host memory: each matrix in the layout
    // the backend computes it fastest in (the sizes are the same).
    for (ExpertPackLayout& l : s.layouts_) l = l.WithSlotLayouts(backend);
    for (ExpertPackLayout& l : s.low_layouts_) l = l.WithSlotLayouts(backend);
    if (!backend.host_memory()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "backend '%s' keeps its memory off the host: expert slots need its SlotDevice",
          backend.name()));
    }
    for (int i = 0; i < slots; ++i) {
      ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> b, backend.Allocate(s.slot_bytes_));
      s.slot_data_.push_back(static_cast<uint8_t*>(b->data()));
      s.memory_.push_back(std::move(b));
    }
  } else {
    ODMOE_ASSIGN_OR_RETURN(uint8_t * base, device->Reserve(slots, stride));
    for (int i = 0; i < slots; ++i) s.slot_data_.push_back(base + static_cast<size_t>(i) * stride);
    const ModelConfig& c = model.config();
    std::vector<ExpertId> set = host_set;
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    // Each kept expert takes its own layer's size; the two staging entries
    // take any expert.
    std::vector<size_t> offsets;
    size_t set_bytes = 0;
    for (const auto& [layer, expert] : set) {
      if (layer < 0 || layer >= c.n_layer || !c.has_experts(layer) || expert < 0 ||
          expert >= c.n_expert) {
        return absl::InvalidArgumentError(
            absl::StrFormat("no expert %d in layer %d to keep in host memory", expert, layer));
      }
      offsets.push_back(set_bytes);
      set_bytes += ExpertSlotStride(s.expert_bytes(layer));
    }
    size_t host_bytes = set_bytes + 2 * stride;
    absl::StatusOr<uint8_t*> pinned = device->ReserveHost(host_bytes);
    if (!pinned.ok() && pinned.status().code() == absl::StatusCode::kResourceExhausted &&
        !set.empty()) {
      // Not that much pinnable memory: every load is staged instead (one
      // pack per load, still one asynchronous copy).
      ODMOE_LOG_WARN("{}: cannot pin {} experts ({} bytes): {}; staging every load instead",
                     device->name(), set.size(), host_bytes, pinned.status().message());
      set.clear();
      set_bytes = 0;
      host_bytes = 2 * stride;
      pinned = device->ReserveHost(host_bytes);
    }
    if (!pinned.ok()) return pinned.status();
    uint8_t* host = *pinned;
    s.pinned_host_bytes_ = host_bytes;
    StepProgress progress(absl::StrCat("packing experts into pinned memory for ", device->name()),
                          set.size(), "experts");
    for (size_t i = 0; i < set.size(); ++i) {
      const auto [layer, expert] = set[i];
      uint8_t* entry = host + offsets[i];
      progress.Advance(1, s.expert_bytes(layer));
      const ExpertTensors tensors = model.Expert(layer, expert);
      PackExpert(tensors, s.layouts_[static_cast<size_t>(layer)], entry);
      s.host_copy_[set[i]] = entry;
      // The packed copy is what loads read from now: give back the file's
      // pages, so the host holds this expert once.
      for (const TensorView* t : {&tensors.gate, &tensors.up, &tensors.down}) {
        DropMappedPages(t->data, t->bytes());
      }
    }
    progress.Finish();
    s.staging_[0] = host + set_bytes;
    s.staging_[1] = host + set_bytes + stride;
    s.device_ = std::move(device);
  }
  s.slots_.resize(static_cast<size_t>(slots));
  return s;
}

int ExpertSlots::FindLoaded(int layer, int expert) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].loaded && slots_[i].layer == layer && slots_[i].expert == expert) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int ExpertSlots::FreeSlot() const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].loaded) return static_cast<int>(i);
  }
  return -1;
}

absl::Status ExpertSlots::CheckLoad(int slot, int layer, int expert, bool low) const {
  if (low && low_model_ == nullptr) {
    return absl::FailedPreconditionError("no low-precision copy of the model to load from");
  }
  if (slot < 0 || slot >= size() || slots_[static_cast<size_t>(slot)].loaded) {
    return absl::FailedPreconditionError(absl::StrFormat("slot %d is not free", slot));
  }
  const ModelConfig& c = model_->config();
  if (layer < 0 || layer >= c.n_layer || !c.has_experts(layer) || expert < 0 ||
      expert >= c.n_expert) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no expert %d in layer %d to load", expert, layer));
  }
  return absl::OkStatus();
}

absl::StatusOr<const uint8_t*> ExpertSlots::DeviceSource(int slot, int layer, int expert,
                                                         bool low) {
  if (auto it = host_copy_.find({layer, expert}); !low && it != host_copy_.end()) {
    return it->second;
  }
  // Stage it: the entry may still feed an earlier copy.
  const int k = next_staging_;
  next_staging_ = 1 - next_staging_;
  if (staging_user_[k] >= 0) ODMOE_RETURN_IF_ERROR(device_->WaitLoadDone(staging_user_[k]));
  PackExpert(Source(low).Expert(layer, expert), Layout(layer, low), staging_[k]);
  staging_user_[k] = slot;
  return staging_[k];
}

ExpertSlots::Slot& ExpertSlots::MarkLoaded(int slot, int layer, int expert, bool low,
                                           std::chrono::steady_clock::time_point t0,
                                           int64_t t0_wall) {
  const size_t bytes = Layout(layer, low).total_bytes;
  Slot& s = slots_[static_cast<size_t>(slot)];
  s = Slot{};
  s.loaded = true;
  s.low = low;
  s.layer = layer;
  s.expert = expert;
  s.bytes = bytes;
  s.issued_at = t0;
  s.issued_wall_us = t0_wall;
  s.loaded_at = std::chrono::steady_clock::now();
  s.last_used = ++use_clock_;
  ++held_;
  peak_held_ = std::max(peak_held_, held_);
  ++loads_;
  ++changes_;
  bytes_loaded_ += bytes;
  return s;
}

absl::Status ExpertSlots::Load(int slot, int layer, int expert, bool prefetched, bool pinned,
                               bool low) {
  ODMOE_RETURN_IF_ERROR(CheckLoad(slot, layer, expert, low));
  const ExpertPackLayout& layout = Layout(layer, low);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_wall = TraceRecorder::NowUs();
  uint8_t* dst = slot_data_[static_cast<size_t>(slot)];
  if (device_ == nullptr) {
    PackExpert(Source(low).Expert(layer, expert), layout, dst, backend_);
    if (load_bandwidth_ > 0) {
      std::this_thread::sleep_until(t0 + Seconds(static_cast<double>(layout.total_bytes) /
                                                 static_cast<double>(load_bandwidth_)));
    }
  } else {
    ODMOE_ASSIGN_OR_RETURN(const uint8_t* src, DeviceSource(slot, layer, expert, low));
    ODMOE_RETURN_IF_ERROR(device_->QueueLoad(slot, dst, src, layout.total_bytes));
  }
  Slot& s = MarkLoaded(slot, layer, expert, low, t0, t0_wall);
  s.prefetched = prefetched;
  s.pinned = pinned;
  s.ready = device_ == nullptr;
  if (s.ready) load_seconds_ += std::chrono::duration<double>(s.loaded_at - t0).count();
  return absl::OkStatus();
}

std::vector<std::pair<size_t, size_t>> ExpertSlots::UnitRanges(int layer, bool low,
                                                               int unit) const {
  const ExpertPackLayout& l = Layout(layer, low);
  switch (unit) {
    case 0: {
      std::vector<std::pair<size_t, size_t>> r;
      if (l.has_bias) r.emplace_back(l.gate_bias_offset, l.total_bytes - l.gate_bias_offset);
      r.emplace_back(l.gate_offset, l.up_offset - l.gate_offset);
      return r;
    }
    case 1:
      return {{l.up_offset, l.down_offset - l.up_offset}};
    default:
      return {{l.down_offset, (l.has_bias ? l.gate_bias_offset : l.total_bytes) - l.down_offset}};
  }
}

absl::Status ExpertSlots::LoadStreamed(int slot, int layer, int expert, bool low) {
  ODMOE_RETURN_IF_ERROR(CheckLoad(slot, layer, expert, low));
  const ExpertPackLayout& layout = Layout(layer, low);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_wall = TraceRecorder::NowUs();
  const uint8_t* src = nullptr;
  if (device_ == nullptr) {
    // Host memory: the copy itself is quick next to an emulated link, which
    // delivers the units one after the other.
    PackExpert(Source(low).Expert(layer, expert), layout, slot_data_[static_cast<size_t>(slot)],
               backend_);
  } else {
    ODMOE_ASSIGN_OR_RETURN(src, DeviceSource(slot, layer, expert, low));
  }
  Slot& s = MarkLoaded(slot, layer, expert, low, t0, t0_wall);
  s.streamed = true;
  s.stream_src = src;
  if (device_ == nullptr) {
    size_t bytes = 0;
    for (int u = 0; u < kUnits; ++u) {
      for (const auto& [offset, n] : UnitRanges(layer, low, u)) bytes += n;
      s.unit_ready[static_cast<size_t>(u)] =
          load_bandwidth_ > 0
              ? t0 + Seconds(static_cast<double>(bytes) / static_cast<double>(load_bandwidth_))
              : s.loaded_at;
    }
    s.loaded_at = std::max(s.loaded_at, s.unit_ready[kUnits - 1]);
    s.ready = load_bandwidth_ == 0;
    load_seconds_ += std::chrono::duration<double>(s.loaded_at - t0).count();
    return absl::OkStatus();
  }
  // The first unit's copy starts now; the others when compute asks for them
  // (AcquireUnit), right behind it on the copy queue.
  double unused = 0;
  return AcquireUnit(slot, -1, &unused).status();
}

absl::StatusOr<ExpertWeights> ExpertSlots::AcquireUnit(int slot, int unit, double* waited) {
  if (slot < 0 || slot >= size() || !slots_[static_cast<size_t>(slot)].loaded) {
    return absl::FailedPreconditionError(absl::StrFormat("slot %d holds no expert", slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.streamed) return Acquire(slot);
  const ExpertWeights w = Layout(s.layer, s.low).WeightsAt(slot_data_[static_cast<size_t>(slot)]);
  if (device_ == nullptr) {
    if (unit < 0) return w;
    const auto ready = s.unit_ready[static_cast<size_t>(std::min(unit, kUnits - 1))];
    const auto now = std::chrono::steady_clock::now();
    if (now < ready) {
      std::this_thread::sleep_until(ready);
      *waited += std::chrono::duration<double>(ready - now).count();
    }
    if (unit >= kUnits - 1) s.ready = true;
    return w;
  }
  // Queue the copies of units up to `unit` (at least the first), then the
  // compute queue waits for the last one queued.
  ODMOE_RETURN_IF_ERROR(QueueUnits(slot, std::max(unit, 0)));
  if (unit >= 0) ODMOE_RETURN_IF_ERROR(device_->ComputeWaitForLoad(slot));
  return w;
}

absl::Status ExpertSlots::QueueUnits(int slot, int through) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  uint8_t* dst = slot_data_[static_cast<size_t>(slot)];
  for (; s.units_queued <= through && s.units_queued < kUnits; ++s.units_queued) {
    for (const auto& [offset, n] : UnitRanges(s.layer, s.low, s.units_queued)) {
      ODMOE_RETURN_IF_ERROR(device_->QueueLoad(slot, dst + offset, s.stream_src + offset, n));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::chrono::steady_clock::time_point> ExpertSlots::WaitLoaded(int slot) {
  if (slot < 0 || slot >= size() || !slots_[static_cast<size_t>(slot)].loaded) {
    return absl::FailedPreconditionError(absl::StrFormat("slot %d holds no expert", slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.ready) return s.loaded_at;
  if (device_ == nullptr) {  // a streamed load on the emulated link
    std::this_thread::sleep_until(s.loaded_at);
    s.ready = true;
    return s.loaded_at;
  }
  // A streamed load: the units compute has not asked for yet go now.
  if (s.streamed) ODMOE_RETURN_IF_ERROR(QueueUnits(slot, kUnits - 1));
  const auto before = std::chrono::steady_clock::now();
  ODMOE_RETURN_IF_ERROR(device_->WaitLoadDone(slot));
  if (load_bandwidth_ > 0) {  // emulation on a device too: the copy ends no sooner than this
    std::this_thread::sleep_until(
        s.issued_at + Seconds(static_cast<double>(s.bytes) / static_cast<double>(load_bandwidth_)));
  }
  const auto after = std::chrono::steady_clock::now();
  ODMOE_ASSIGN_OR_RETURN(const double device_seconds, device_->LoadSeconds(slot));
  // Waited: it ended just now. Did not wait: it ended before we asked, at
  // best its device time after it was queued (a streamed load's device time
  // is its last unit's: it ended before we asked, no more is known).
  const bool waited = after - before > std::chrono::microseconds(20);
  s.loaded_at = waited      ? after
                : s.streamed ? before
                             : std::min(before, s.issued_at + Seconds(device_seconds));
  s.ready = true;
  const double elapsed = std::chrono::duration<double>(s.loaded_at - s.issued_at).count();
  load_seconds_ += s.streamed ? elapsed : std::max(device_seconds, load_bandwidth_ > 0 ? elapsed : 0);
  return s.loaded_at;
}

absl::StatusOr<ExpertWeights> ExpertSlots::Acquire(int slot) {
  if (slot < 0 || slot >= size() || !slots_[static_cast<size_t>(slot)].loaded) {
    return absl::FailedPreconditionError(absl::StrFormat("slot %d holds no expert", slot));
  }
  if (device_ != nullptr) ODMOE_RETURN_IF_ERROR(device_->ComputeWaitForLoad(slot));
  const Slot& s = slots_[static_cast<size_t>(slot)];
  return Layout(s.layer, s.low).WeightsAt(slot_data_[static_cast<size_t>(slot)]);
}

absl::Status ExpertSlots::Release(int slot) {
  if (device_ == nullptr) return absl::OkStatus();
  return device_->RecordRelease(slot);
}

void ExpertSlots::Evict(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.loaded) return;
  s = Slot{};
  --held_;
  ++changes_;
}

}  // namespace odmoe
