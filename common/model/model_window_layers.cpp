// The blocks Gemma 4 brought (arch_blocks.h): sliding layers with a shape of
// their own, the file's pattern of sliding layers, RoPE factors, the
// sandwich norms, the dense FFN beside the experts, the router's scales and
// the layer's output scale. Read and bound as ModelFile does the others
// (model_file.cpp), every key and tensor checked, errors naming them.
#include <algorithm>
#include <cmath>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/gguf_checks.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status ModelFile::ReadWindowLayerShapes() {
  const GgufFile& f = *gguf_;
  const ArchDesc& a = *arch_;
  ModelConfig& c = config_;
  auto key = [&](std::string_view suffix) { return MetadataKey(a, suffix); };
  const size_t n = static_cast<size_t>(c.n_layer);
  if (c.window_layers == WindowLayers::kFromFile) {
    const std::string k = key("attention.sliding_window_pattern");
    const GgufValue* v = f.Find(k);
    const auto* bools = v == nullptr ? nullptr : std::get_if<std::vector<bool>>(&v->storage());
    if (bools == nullptr || bools->size() != n) {
      return Invalid(f.path(), absl::StrFormat("metadata key '%s' must be an array of %d bools "
                                               "(one per layer: true where it slides)",
                                               k, c.n_layer));
    }
    c.window_pattern.assign(bools->begin(), bools->end());
  }
  // What the file has and odmoe does not run is refused by name.
  ODMOE_ASSIGN_OR_RETURN(const int per_layer_embd,
                         ReadInt(f, key("embedding_length_per_layer_input"), 0, 1 << 20, 0));
  if (per_layer_embd > 0) {
    return Invalid(f.path(),
                   absl::StrFormat("'%s' = %d: per-layer embeddings (Gemma 4 E2B / "
                                   "E4B) are not supported",
                                   key("embedding_length_per_layer_input"), per_layer_embd));
  }
  ODMOE_ASSIGN_OR_RETURN(const int shared_kv,
                         ReadInt(f, key("attention.shared_kv_layers"), 0, c.n_layer, 0));
  if (shared_kv > 0) {
    return Invalid(f.path(), absl::StrFormat("'%s' = %d: layers sharing another layer's KV "
                                             "cache are not supported",
                                             key("attention.shared_kv_layers"), shared_kv));
  }
  ODMOE_ASSIGN_OR_RETURN(c.final_logit_softcap,
                         ReadFloat(f, key("final_logit_softcapping"), 0.0, 1e6, 0.0));
  if (!c.window_layer_shape) return absl::OkStatus();

  // Full layers: the common keys; sliding layers: the *_swa keys.
  ODMOE_ASSIGN_OR_RETURN(const int head_full, ReadInt(f, key("attention.key_length"), 2, 1 << 14));
  ODMOE_ASSIGN_OR_RETURN(const int head_swa,
                         ReadInt(f, key("attention.key_length_swa"), 2, 1 << 14, head_full));
  ODMOE_ASSIGN_OR_RETURN(const int value_full,
                         ReadInt(f, key("attention.value_length"), 2, 1 << 14, head_full));
  ODMOE_ASSIGN_OR_RETURN(const int value_swa,
                         ReadInt(f, key("attention.value_length_swa"), 2, 1 << 14, head_swa));
  if (value_full != head_full || value_swa != head_swa) {
    return Invalid(f.path(), absl::StrFormat("value_length %d / value_length_swa %d must equal "
                                             "key_length %d / key_length_swa %d",
                                             value_full, value_swa, head_full, head_swa));
  }
  ODMOE_ASSIGN_OR_RETURN(const int rope_full,
                         ReadInt(f, key("rope.dimension_count"), 2, head_full, head_full));
  ODMOE_ASSIGN_OR_RETURN(const int rope_swa,
                         ReadInt(f, key("rope.dimension_count_swa"), 2, head_swa, head_swa));
  ODMOE_ASSIGN_OR_RETURN(const float base_full,
                         ReadFloat(f, key("rope.freq_base"), 1.0, 1e12, 1e4));
  ODMOE_ASSIGN_OR_RETURN(const float base_swa,
                         ReadFloat(f, key("rope.freq_base_swa"), 1.0, 1e12, base_full));
  if (head_full % 2 != 0 || head_swa % 2 != 0 || rope_full % 2 != 0 || rope_swa % 2 != 0) {
    return Invalid(f.path(), "head and rope dimensions must be even");
  }
  // KV heads: one value, or one per layer.
  const std::string kv_key = key("attention.head_count_kv");
  std::vector<int32_t> kv_heads(n, c.n_head);
  if (const GgufValue* v = f.Find(kv_key); v != nullptr && v->type() == GgufType::kArray) {
    std::optional<std::vector<int32_t>> arr = v->AsI32Array();
    if (!arr || arr->size() != n) {
      return Invalid(f.path(), absl::StrFormat("metadata key '%s' must be one integer or %d "
                                               "integers (one per layer)",
                                               kv_key, c.n_layer));
    }
    kv_heads = *arr;
  } else {
    ODMOE_ASSIGN_OR_RETURN(const int h, ReadInt(f, kv_key, 1, 4096, c.n_head));
    kv_heads.assign(n, h);
  }
  // The full layers' RoPE factors: 1 for a pair that rotates, 1e30 (no
  // rotation) for the others, which must all come after the rotating ones.
  int rope_pairs = 0;
  if (c.rope_freq_factors) {
    const std::string name = TensorName(a, TensorRole::kRopeFreqs);
    ODMOE_ASSIGN_OR_RETURN(TensorView t, Expect(f, name, {rope_full / 2}, true));
    const float* x = static_cast<const float*>(t.data);
    while (rope_pairs < rope_full / 2 && x[rope_pairs] == 1.0f) ++rope_pairs;
    for (int i = rope_pairs; i < rope_full / 2; ++i) {
      if (!(x[i] >= 1e20f)) {
        return Invalid(f.path(), absl::StrFormat("tensor '%s': factor %g at pair %d: odmoe runs "
                                                 "factors of 1 (rotate) followed by >= 1e20 "
                                                 "(no rotation) only",
                                                 name, x[i], i));
      }
    }
    if (rope_pairs == rope_full / 2) rope_pairs = 0;  // every pair rotates
  }
  c.layer_attention.resize(n);
  c.head_dim = 0;
  c.n_head_kv = 0;
  for (size_t l = 0; l < n; ++l) {
    const bool slides = c.window_of(static_cast<int>(l)) > 0;
    LayerAttention& la = c.layer_attention[l];
    la.head_dim = slides ? head_swa : head_full;
    la.n_head_kv = kv_heads[l];
    la.rope_dims = slides ? rope_swa : rope_full;
    la.rope_pairs = slides ? 0 : rope_pairs;
    la.rope_freq_base = slides ? base_swa : base_full;
    if (la.n_head_kv < 1 || c.n_head % la.n_head_kv != 0) {
      return Invalid(f.path(), absl::StrFormat("layer %d: head_count %d is not a multiple of its "
                                               "head_count_kv %d",
                                               l, c.n_head, la.n_head_kv));
    }
    c.head_dim = std::max(c.head_dim, la.head_dim);
    c.n_head_kv = std::max(c.n_head_kv, la.n_head_kv);
  }
  c.rope_dims = rope_full;
  c.rope_freq_base = base_full;
  return absl::OkStatus();
}

absl::Status ModelFile::BindGemmaLayerTensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  auto name = [&](TensorRole role) { return TensorName(*arch_, role, l); };
  const int64_t d = c.n_embd;
  if (c.post_norms) {
    ODMOE_ASSIGN_OR_RETURN(t->attn_post_norm,
                           Expect(f, name(TensorRole::kAttnPostNorm), {d}, true));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_post_norm, Expect(f, name(TensorRole::kFfnPostNorm), {d}, true));
  }
  if (c.layer_output_scale && f.HasTensor(name(TensorRole::kLayerOutputScale))) {
    ODMOE_ASSIGN_OR_RETURN(t->layer_output_scale,
                           Expect(f, name(TensorRole::kLayerOutputScale), {1}, true));
  }
  if (c.ffn_layout == FfnLayout::kDenseBesideExperts && c.has_experts(l)) {
    const int64_t fb = c.n_ff_beside;
    ODMOE_ASSIGN_OR_RETURN(t->ffn_gate, Expect(f, name(TensorRole::kFfnGate), {d, fb}));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_up, Expect(f, name(TensorRole::kFfnUp), {d, fb}));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_down, Expect(f, name(TensorRole::kFfnDown), {fb, d}));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_post_norm_1,
                           Expect(f, name(TensorRole::kFfnPostNorm1), {d}, true));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_pre_norm_2, Expect(f, name(TensorRole::kFfnPreNorm2), {d}, true));
    ODMOE_ASSIGN_OR_RETURN(t->ffn_post_norm_2,
                           Expect(f, name(TensorRole::kFfnPostNorm2), {d}, true));
  }
  if (c.router_input == RouterInput::kScaledRms && c.has_experts(l)) {
    ODMOE_ASSIGN_OR_RETURN(t->router_scale,
                           Expect(f, name(TensorRole::kFfnGateInpScale), {d}, true));
  }
  if (c.expert_weight_scale && c.has_experts(l)) {
    ODMOE_ASSIGN_OR_RETURN(t->expert_scale,
                           Expect(f, name(TensorRole::kFfnDownExpsScale), {c.n_expert}, true));
  }
  return absl::OkStatus();
}

}  // namespace odmoe
