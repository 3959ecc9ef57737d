#include "worker_node/expert_slots.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<ExpertSlots> ExpertSlots::Create(const ModelFile& model, Backend& backend,
                                                int slots) {
  if (slots < 1) return absl::InvalidArgumentError("a worker needs at least one expert slot");
  ExpertSlots s(model, backend, ExpertPackLayout::For(model.config()));
  for (int i = 0; i < slots; ++i) {
    ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> b,
                           backend.Allocate(s.layout_.total_bytes));
    s.memory_.push_back(std::move(b));
  }
  s.slots_.resize(static_cast<size_t>(slots));
  if (!backend.host_memory()) s.staging_.resize(s.layout_.total_bytes);
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

absl::StatusOr<double> ExpertSlots::Load(int slot, int layer, int expert, bool prefetched,
                                         bool pinned) {
  if (slot < 0 || slot >= size() || slots_[static_cast<size_t>(slot)].loaded) {
    return absl::FailedPreconditionError(absl::StrFormat("slot %d is not free", slot));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const ExpertTensors tensors = model_->Expert(layer, expert);
  void* dst = memory_[static_cast<size_t>(slot)]->data();
  if (backend_->host_memory()) {
    PackExpert(tensors, layout_, static_cast<uint8_t*>(dst));
  } else {
    PackExpert(tensors, layout_, staging_.data());
    ODMOE_RETURN_IF_ERROR(backend_->CopyToBackend(dst, staging_.data(), layout_.total_bytes));
    ODMOE_RETURN_IF_ERROR(backend_->Synchronize());
  }
  if (load_bandwidth_ > 0) {
    const auto until = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(
                                    static_cast<double>(layout_.total_bytes) /
                                    static_cast<double>(load_bandwidth_)));
    std::this_thread::sleep_until(until);
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  s = Slot{true, layer, expert, prefetched, pinned, std::chrono::steady_clock::now(),
           ++use_clock_};
  ++held_;
  peak_held_ = std::max(peak_held_, held_);
  ++loads_;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  load_seconds_ += seconds;
  return seconds;
}

int ExpertSlots::LeastRecentlyUsed() const {
  int best = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.loaded || s.pinned) continue;
    if (best < 0 || s.last_used < slots_[static_cast<size_t>(best)].last_used) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

void ExpertSlots::Evict(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.loaded) return;
  s = Slot{};
  --held_;
}

}  // namespace odmoe
