// A Mixture-of-Experts model's configuration: the blocks of its
// architecture's layers (ArchBlocks, copied whole from the architecture's
// description in model_arch.h) and the hyperparameters its GGUF metadata and
// tensors give, validated (model_file.h fills it in).
//
//   const ModelConfig& c = model->config();
//   bool per_head = c.qk_norm == QkNorm::kPerHead;  // ArchBlocks: the architecture's
//   int kv_width = c.n_head_kv * c.head_dim;     // K/V row width
//   const ExpertStorage& s = c.experts_of(3);     // layer 3's expert types
//   size_t largest = c.expert_bytes_max;            // gate + up + down, any layer
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/arch_blocks.h"
#include "tensor/dtype.h"

namespace odmoe {

/// How the experts are stored in the file.
enum class ExpertLayout {
  kStacked,    // 3-D tensors blk.N.ffn_{gate,up,down}_exps (current converters)
  kPerExpert,  // 2-D tensors blk.N.ffn_{gate,up,down}.E (older converters)
  /// 3-D blk.N.ffn_gate_up_exps {n_embd, 2 n_ff, n_expert}: each expert's
  /// gate rows, then its up rows (Gemma 4's converter), and ffn_down_exps.
  kStackedGateUp,
};

/// How one expert of a layer is stored in the file: the types of its three
/// matrices and their bytes together.
struct ExpertStorage {
  DType gate_type = DType::kF32;
  DType up_type = DType::kF32;
  DType down_type = DType::kF32;
  size_t bytes = 0;  // gate + up + down of one expert
  bool operator==(const ExpertStorage& o) const {
    return gate_type == o.gate_type && up_type == o.up_type && down_type == o.down_type;
  }
};

/// The shapes of multi-head latent attention (DeepSeek-V2); all 0 for other
/// attention. Per position the cache holds the normed latent (kv_lora_rank
/// floats) and the rotated shared key (qk_rope floats); a head's query is
/// qk_nope + qk_rope wide before absorption, its value v_head wide after.
struct MlaShape {
  int kv_lora_rank = 0;
  int q_lora_rank = 0;  // 0: q is one projection (V2-Lite); else q_a, norm, q_b
  int qk_nope = 0;
  int qk_rope = 0;
  int v_head = 0;
  int qk_head() const { return qk_nope + qk_rope; }
};

/// The attention shape of one layer where layers differ
/// (ArchBlocks::window_layer_shape: Gemma 4's sliding and full layers).
struct LayerAttention {
  int head_dim = 0;
  int n_head_kv = 0;
  int rope_dims = 0;   // RopeParams::dims
  int rope_pairs = 0;  // RopeParams::rotated_pairs (0: every pair)
  float rope_freq_base = 10000.0f;
  bool v_from_k = false;  // no attn_v: V is K's projection (ArchBlocks::v_optional)
};

/// The shapes of Gated DeltaNet (ArchBlocks::delta_net; all 0 otherwise),
/// from the file's ssm.* keys. Per row the input projection gives q and k
/// (n_k_heads x head_k each) and v (n_v_heads x head_v): conv_dim() channels
/// through a causal depthwise convolution of conv_kernel taps; per value head
/// the recurrent state is head_v x head_k floats.
struct DeltaNetShape {
  int conv_kernel = 0;  // ssm.conv_kernel
  int n_k_heads = 0;    // ssm.group_count
  int n_v_heads = 0;    // ssm.time_step_rank
  int head_k = 0;       // ssm.state_size
  int head_v = 0;       // ssm.inner_size / n_v_heads
  int key_dim() const { return n_k_heads * head_k; }
  int value_dim() const { return n_v_heads * head_v; }
  int conv_dim() const { return 2 * key_dim() + value_dim(); }
  /// Floats of one layer's state: the last conv_kernel - 1 inputs, then the
  /// per-head matrices.
  int64_t conv_state_floats() const { return int64_t{conv_kernel - 1} * conv_dim(); }
  int64_t delta_state_floats() const { return int64_t{n_v_heads} * head_v * head_k; }
};

/// The shapes of Mamba-2 (ArchBlocks::mamba2; all 0 otherwise), from the
/// file's ssm.* keys. Per row the input projection gives
/// [z (inner) | x (inner) | B (n_groups x state) | C (the same) | dt (n_heads)];
/// x, B and C (conv_dim() channels) go through a causal depthwise convolution
/// of conv_kernel taps; per head the state is head_dim x state floats.
struct Mamba2Shape {
  int conv_kernel = 0;  // ssm.conv_kernel
  int n_heads = 0;      // ssm.time_step_rank
  int head_dim = 0;     // ssm.inner_size / n_heads
  int n_groups = 0;     // ssm.group_count (B, C and the gated norm's groups)
  int state = 0;        // ssm.state_size
  int64_t inner() const { return int64_t{n_heads} * head_dim; }
  int64_t conv_dim() const { return inner() + 2 * int64_t{n_groups} * state; }
  int64_t in_proj() const { return inner() + conv_dim() + n_heads; }
  int64_t conv_state_floats() const { return int64_t{conv_kernel - 1} * conv_dim(); }
  int64_t ssm_state_floats() const { return inner() * state; }
};

/// What one layer of a hybrid model (ArchBlocks::mamba2) is.
enum class LayerBlock : uint8_t {
  kMamba2,     // the Mamba-2 mixer (a recurrent layer)
  kAttention,  // grouped-query attention only
  kFfn,        // the FFN only (routed experts + shared expert)
};

/// ArchBlocks (the architecture's, never the file's) plus what the file says.
struct ModelConfig : ArchBlocks {
  std::string arch;  // general.architecture
  std::string name;  // general.name ("" if absent)
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;     // n_embd / n_head unless the file says otherwise
  int rope_dims = 0;    // dims rotated per head (<= head_dim)
  int n_ff = 0;         // hidden size of one routed expert
  int n_ff_shared = 0;  // hidden size of the shared expert (0: the model has none)
  int n_expert = 0;
  int n_expert_used = 0;  // top-k
  int n_ctx_train = 0;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  RopeScaling rope_scaling;  // <arch>.rope.scaling.* (type kNone without them)
  int sliding_window = 0;    // window of the sliding layers (ArchBlocks::window_layers; 0: none)
  bool attn_bias = false;    // q/k/v (and, where present, output) projections have biases
  RouterGating gating;       // how the router's logits become expert weights
  /// The MoE layers carry blk.N.exp_probs_b.bias (sigmoid routing's
  /// correction bias, RouterGating::selection_bias).
  bool router_selection_bias = false;
  /// Trailing layers of the file that predict further tokens (GLM-4.5's
  /// NextN / MTP, `<arch>.nextn_predict_layers`): counted in block_count, not
  /// in n_layer; odmoe neither reads nor runs them.
  int n_layer_nextn = 0;
  ExpertLayout expert_layout = ExpertLayout::kStacked;
  bool output_tied = false;  // LM head shares token_embd (no output.weight)
  MlaShape mla;              // attention == kMla
  /// Softmax scale of attention scores: 1/sqrt(head_dim), or for MLA
  /// 1/sqrt(qk_head) times YaRN's mscale^2 (model_file.cpp).
  float attn_scale = 0.0f;
  /// Layers [0, n_dense_leading) have a dense FFN of n_ff_dense instead of
  /// experts (DeepSeek's first layer); they run on the main node.
  int n_dense_leading = 0;
  int n_ff_dense = 0;
  /// FfnLayout::kDenseBesideExperts: the width of the dense FFN next to the
  /// experts of every layer (`feed_forward_length`).
  int n_ff_beside = 0;
  /// > 0: logits = cap * tanh(logits / cap) (`final_logit_softcapping`).
  float final_logit_softcap = 0.0f;
  /// WindowLayers::kFromFile: 1 where a layer slides (one per layer).
  std::vector<uint8_t> window_pattern;
  /// window_layer_shape: every layer's attention shape (one per layer);
  /// empty: every layer has head_dim, n_head_kv, rope_dims, rope_freq_base.
  std::vector<LayerAttention> layer_attention;
  /// ArchBlocks::delta_net: the linear-attention shapes and, per layer, 1 for
  /// a recurrent (Gated DeltaNet) layer, 0 for an attention layer.
  DeltaNetShape delta;
  std::vector<uint8_t> recurrent_layers;
  /// > 1: after the leading dense layers only the layers with
  /// (l + 1) % moe_layer_step == 0 have experts, the others the dense FFN of
  /// n_ff_dense (Llama 4's interleave_moe_layer_step); 0 or 1: every layer.
  int moe_layer_step = 0;
  /// Llama 4 (ArchBlocks::nope_layer_step): the rotating layers attend within
  /// chunks of attn_chunk positions (0: no chunks); the NoPE layers scale a
  /// query at position p by log(floor((p + 1) / attn_temp_length) + 1) *
  /// attn_temp_scale + 1 (attn_temp_length 0: no scaling).
  int attn_chunk = 0;
  int attn_temp_length = 0;
  float attn_temp_scale = 0.0f;
  /// ArchBlocks::mamba2: the Mamba-2 shapes and each layer's one block (its
  /// kMamba2 layers are also marked in recurrent_layers).
  Mamba2Shape mamba;
  std::vector<LayerBlock> layer_blocks;

  // Storage of the experts, per layer: every expert of a layer is stored
  // alike (validated at load), layers may differ (files from the common
  // quantizers keep ffn_down at more bits in some layers). Dense layers have
  // an empty entry (bytes 0).
  std::vector<ExpertStorage> expert_storage;  // one per layer
  size_t expert_bytes_max = 0;                // the largest expert of any layer

  /// Width of q rows (the widest layer's where layers differ: buffers).
  int q_width() const { return n_head * head_dim; }
  /// Layer `layer`'s attention shape (layer_attention, or the uniform one).
  LayerAttention attention_of(int layer) const {
    if (!layer_attention.empty()) return layer_attention[static_cast<size_t>(layer)];
    return LayerAttention{head_dim, n_head_kv, rope_dims, 0, rope_freq_base, false};
  }
  int kv_width_of(int layer) const {
    const LayerAttention a = attention_of(layer);
    return a.n_head_kv * a.head_dim;
  }
  /// True when `layer` mixes tokens with Gated DeltaNet instead of attention.
  bool is_recurrent(int layer) const {
    return !recurrent_layers.empty() && recurrent_layers[static_cast<size_t>(layer)] != 0;
  }
  /// Recurrent layers (each has a state per sequence: RecurrentState).
  int n_recurrent() const {
    int n = 0;
    for (uint8_t r : recurrent_layers) n += r;
    return n;
  }
  /// True when `layer` has a token mixer (attention, DeltaNet, Mamba-2):
  /// every layer but a hybrid model's FFN layers.
  bool has_mixer(int layer) const {
    return layer_blocks.empty() || layer_blocks[static_cast<size_t>(layer)] != LayerBlock::kFfn;
  }
  /// True when `layer` has an FFN: every layer but a hybrid model's mixers.
  bool has_ffn(int layer) const {
    return layer_blocks.empty() || layer_blocks[static_cast<size_t>(layer)] == LayerBlock::kFfn;
  }
  /// True when `layer` routes to experts (false: a dense layer, or none):
  /// past the leading dense layers, an FFN layer, every moe_layer_step-th.
  bool has_experts(int layer) const {
    return layer >= n_dense_leading && has_ffn(layer) &&
           (moe_layer_step <= 1 || (layer + 1) % moe_layer_step == 0);
  }
  /// Layers with experts.
  int n_moe_layer() const {
    int n = 0;
    for (int l = 0; l < n_layer; ++l) n += has_experts(l) ? 1 : 0;
    return n;
  }
  /// The first layer with experts (n_layer if none).
  int first_moe_layer() const {
    int l = n_dense_leading;
    while (l < n_layer && !has_experts(l)) ++l;
    return l;
  }
  /// True when some layer has the dense FFN (an FFN without experts).
  bool has_dense_layers() const {
    for (int l = 0; l < n_layer; ++l) {
      if (has_ffn(l) && !has_experts(l)) return true;
    }
    return false;
  }
  /// Whether `layer` rotates q and k (false: a NoPE layer).
  bool rope_of(int layer) const {
    return nope_layer_step <= 0 || (layer + 1) % nope_layer_step != 0;
  }
  /// The attention chunk of `layer` (0: none): a query at p sees the keys at
  /// [p - p % chunk, p] only.
  int chunk_of(int layer) const { return nope_layer_step > 0 && rope_of(layer) ? attn_chunk : 0; }
  /// The factor of a query at `pos` in `layer` (1 outside the NoPE layers).
  float attn_temperature_of(int layer, int pos) const {
    if (rope_of(layer) || attn_temp_length <= 0) return 1.0f;
    return std::log(std::floor((static_cast<float>(pos) + 1.0f) / attn_temp_length) + 1.0f) *
               attn_temp_scale +
           1.0f;
  }
  /// V rows are the first (kv_lora_rank) floats of the K rows (MLA's latent
  /// cache): the KV cache stores K only.
  bool v_in_k() const { return attention == AttentionKind::kMla; }
  /// Elements per V head as attention reads them (head_dim, or MLA's latent).
  int v_head_dim() const { return v_in_k() ? mla.kv_lora_rank : head_dim; }
  /// The attention window of `layer` (0: every past position).
  int window_of(int layer) const {
    if (window_layers == WindowLayers::kFromFile) {
      return window_pattern[static_cast<size_t>(layer)] != 0 ? sliding_window : 0;
    }
    const bool slides = window_layers == WindowLayers::kEven && layer % 2 == 0;
    return slides ? sliding_window : 0;
  }
  /// K/V row width (the widest layer's where layers differ).
  int kv_width() const {
    int w = n_head_kv * head_dim;
    for (const LayerAttention& a : layer_attention) w = std::max(w, a.n_head_kv * a.head_dim);
    return w;
  }
  /// Storage of the experts of `layer` (in [0, n_layer)).
  const ExpertStorage& experts_of(int layer) const {
    return expert_storage[static_cast<size_t>(layer)];
  }
  /// True when every layer stores its experts alike.
  bool expert_storage_uniform() const {
    for (int l = n_dense_leading; l < n_layer; ++l) {
      if (!has_experts(l)) continue;
      if (!(experts_of(l) == experts_of(first_moe_layer()))) return false;
    }
    return true;
  }
};

}  // namespace odmoe
