#include "engine/kv_cache.h"

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<KvCache> KvCache::Create(Backend& backend, const ModelConfig& config, int capacity) {
  if (capacity < 1) return absl::InvalidArgumentError("KV cache capacity must be >= 1");
  KvCache kv;
  kv.capacity_ = capacity;
  kv.width_ = config.kv_width();
  size_t per_side = static_cast<size_t>(config.n_layer) * capacity * kv.width_;
  // Layers of different widths, packed: Gemma 4's sliding and full layers;
  // recurrent layers (Gated DeltaNet) keep no rows (RecurrentState instead).
  if (!config.layer_attention.empty() || config.n_recurrent() > 0) {
    per_side = 0;
    for (int l = 0; l < config.n_layer; ++l) {
      const int64_t width = config.is_recurrent(l) ? 0 : config.kv_width_of(l);
      kv.offsets_.push_back(static_cast<int64_t>(per_side));
      kv.widths_.push_back(width);
      per_side += static_cast<size_t>(capacity) * width;
    }
  }
  // MLA's latent cache: V is the head of every K row, nothing to store twice.
  const size_t sides = config.v_in_k() ? 1 : 2;
  ODMOE_ASSIGN_OR_RETURN(kv.buffer_, backend.Allocate(sides * per_side * sizeof(float)));
  kv.k_base_ = static_cast<float*>(kv.buffer_->data());
  kv.v_base_ = config.v_in_k() ? kv.k_base_ : kv.k_base_ + per_side;
  kv.v_in_k_ = config.v_in_k();
  return kv;
}

}  // namespace odmoe
