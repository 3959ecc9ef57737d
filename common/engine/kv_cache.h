// The attention KV cache of one sequence: per layer, K and V rows of
// n_head_kv * head_dim floats for positions [0, capacity), in backend memory.
// With multi-head latent attention (ModelConfig::v_in_k) only K rows are
// stored (latent + rotated key); v(layer) is the same matrix, whose first
// kv_lora_rank floats per row are the values.
//
//   ODMOE_ASSIGN_OR_RETURN(KvCache kv, KvCache::Create(*backend, config, 512));
//   backend->Copy(k_new, kv.k(layer).RowRange(pos0, n));
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "model/model_config.h"

namespace odmoe {

class KvCache {
 public:
  static absl::StatusOr<KvCache> Create(Backend& backend, const ModelConfig& config, int capacity);

  int capacity() const { return capacity_; }
  /// Layer `layer`'s rows: ModelConfig::kv_width_of(layer) floats each
  /// (layers may differ: Gemma 4's sliding and full layers); none (0 columns)
  /// for a recurrent layer, whose state is RecurrentState's.
  Mat k(int layer) const { return {k_base_ + LayerOffset(layer), capacity_, WidthOf(layer)}; }
  Mat v(int layer) const { return {v_base_ + LayerOffset(layer), capacity_, WidthOf(layer)}; }
  /// True when v(layer) is k(layer) (MLA): writers fill K only.
  bool v_in_k() const { return v_in_k_; }

 private:
  int64_t LayerOffset(int layer) const {
    if (!offsets_.empty()) return offsets_[static_cast<size_t>(layer)];
    return static_cast<int64_t>(layer) * capacity_ * width_;
  }
  int64_t WidthOf(int layer) const {
    return widths_.empty() ? width_ : widths_[static_cast<size_t>(layer)];
  }
  std::vector<int64_t> offsets_, widths_;  // per layer where widths differ; else empty
  std::unique_ptr<BackendBuffer> buffer_;
  float* k_base_ = nullptr;
  float* v_base_ = nullptr;
  int capacity_ = 0;
  int64_t width_ = 0;
  bool v_in_k_ = false;
};

}  // namespace odmoe
