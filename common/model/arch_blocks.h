// What the layers of an architecture are made of: the attention block and
// its variant, the RoPE layout, the q/k norms, and the parts of the FFN
// block (router bias, expert activation and biases, shared expert).
//
// An architecture's description (model_arch.h) states these facts once, by
// name; ModelFile copies them whole into the model's ModelConfig (which
// derives from ArchBlocks), and the layer code (common/engine) reads them
// from there. A GGUF file cannot change them: what a file may change (head
// sizes, the window's length, RoPE scaling, whether the router's weights are
// renormalised) lives in ModelConfig's own fields.
//
//   ArchBlocks b = {.rope_mode = RopeMode::kHalf, .qk_norm = QkNorm::kPerHead};  // Qwen3-MoE
//   bool per_head = b.qk_norm == QkNorm::kPerHead;  // one weight vector shared by heads
//   int window = config.window_of(layer);        // ModelConfig: 0 unless that layer slides
#pragma once

#include "backend/backend.h"

namespace odmoe {

/// The attention of an architecture.
enum class AttentionKind {
  kGrouped,  // q/k/v projections, grouped-query heads (every MHA/GQA model)
  kMla,      // multi-head latent attention: a compressed latent KV cache (DeepSeek-V2)
};

/// How attention normalises q and k (RMS norm before RoPE).
enum class QkNorm {
  kNone,
  kPerHead,  // each head's head_dim values, one weight vector shared by heads (Qwen3)
  kFull,     // the whole q (and k) row, a weight per element (OLMoE)
};

/// The activation between an expert's gate / up and down projections.
struct ExpertActivation {
  enum class Kind {
    kSwiGlu,     // silu(gate) * up (Backend::SwiGlu)
    kSwiGluOai,  // gpt-oss's clamped SwiGLU (Backend::SwiGluOai with alpha, limit)
    kGeGlu,      // gelu_tanh(gate) * up (Backend::GeGlu; Gemma's "gelu_pytorch_tanh")
  };
  Kind kind = Kind::kSwiGlu;
  float alpha = 0.0f;  // kSwiGluOai only
  float limit = 0.0f;  // kSwiGluOai only
  bool operator==(const ExpertActivation& o) const {
    return kind == o.kind && alpha == o.alpha && limit == o.limit;
  }
};

/// Which layers use a sliding attention window (`<arch>.attention.sliding_window`).
enum class WindowLayers {
  kNone,  // every layer attends to every past position
  kEven,  // layers 0, 2, 4, ... slide; odd layers are full (gpt-oss)
  /// The file says, one bool per layer in `<arch>.attention.sliding_window_pattern`
  /// (Gemma 4: five sliding layers, then a full one).
  kFromFile,
};

/// The FFN block of a layer with experts.
enum class FfnLayout {
  /// ffn_norm, the router and the experts (and a shared expert where the
  /// architecture has one); the sum is the block's output.
  kExperts,
  /// Gemma 4: a dense FFN (ffn_gate / ffn_up / ffn_down behind ffn_norm,
  /// then post_ffw_norm_1) beside the experts (behind pre_ffw_norm_2, then
  /// post_ffw_norm_2); their sum goes through post_ffw_norm.
  kDenseBesideExperts,
};

/// What the router reads.
enum class RouterInput {
  kFfnNorm,  // the FFN norm's output, the experts' input
  /// Gemma 4: rms_norm(x) * ffn_gate_inp.scale / sqrt(n_embd) of the residual
  /// stream x (no learned norm of its own).
  kScaledRms,
};

/// How Gated DeltaNet's value heads read the key heads when there are more
/// of them (ssm.time_step_rank > ssm.group_count; r = n_v / n_k).
enum class DeltaNetHeadOrder {
  kGrouped,  // v head j reads k head j / r (Qwen3-Next's files: the checkpoint's order)
  kTiled,    // v head j reads k head j % n_k (Qwen3.5's files: the converter reorders V heads)
};

/// The blocks of an architecture's layers. The defaults are the plain
/// Mixtral-style layer: grouped-query attention with interleaved RoPE, no q/k
/// norm, a bias-free router over SwiGLU experts, no shared expert.
struct ArchBlocks {
  // Attention.
  AttentionKind attention = AttentionKind::kGrouped;
  RopeMode rope_mode = RopeMode::kInterleaved;
  QkNorm qk_norm = QkNorm::kNone;
  bool attn_sinks = false;  // per-head sink logits (blk.N.attn_sinks.weight) in every layer
  WindowLayers window_layers = WindowLayers::kNone;  // the window's length comes from the file
  /// The sliding layers have a shape of their own (Gemma 4): head size
  /// `attention.key_length_swa`, RoPE `rope.dimension_count_swa` and
  /// `rope.freq_base_swa`; `attention.head_count_kv` may be one value per
  /// layer. The full layers read the common keys.
  bool window_layer_shape = false;
  /// The full layers' RoPE rotates only the pairs whose factor in
  /// `rope_freqs.weight` is 1 (the others, 1e30, stay as they are: Gemma 4's
  /// "proportional" RoPE, a quarter of the pairs over the whole head).
  bool rope_freq_factors = false;
  /// Scores are q.k unscaled (q and k are RMS-normed: Gemma 4); false:
  /// q.k / sqrt(head_dim).
  bool attn_unscaled = false;
  /// V is RMS-normed per head without a weight (Gemma 4's v_norm).
  bool v_norm = false;
  /// A layer without attn_v uses K's projection as V (before K's norm and
  /// RoPE; Gemma 4's attention_k_eq_v full layers).
  bool v_optional = false;

  // The residual stream.
  /// Token embeddings are multiplied by sqrt(n_embd) (Gemma).
  bool embd_scaled = false;
  /// The attention's and the FFN's outputs are RMS-normed before they join
  /// the residual stream (post_attention_norm, post_ffw_norm: Gemma's
  /// "sandwich" norms).
  bool post_norms = false;
  /// A layer's output (residual included) is multiplied by
  /// blk.N.layer_output_scale.weight where the file has it (Gemma 4).
  bool layer_output_scale = false;

  // The FFN of the layers with experts.
  FfnLayout ffn_layout = FfnLayout::kExperts;
  RouterInput router_input = RouterInput::kFfnNorm;
  /// Each chosen expert's weight is multiplied by its entry of
  /// blk.N.ffn_down_exps.scale (Gemma 4's per_expert_scale), after the top-k.
  bool expert_weight_scale = false;
  bool router_bias = false;  // blk.N.ffn_gate_inp.bias, added to the logits before the top-k
  ExpertActivation expert_activation =
      {};                    // its constants are the architecture's (not in the GGUF)
  bool expert_bias = false;  // gate / up / down biases per expert (ffn_*_exps.bias)
  /// A shared expert per layer (ffn_*_shexp), run for every row next to the
  /// routed ones (on the main node); its width comes from the tensors.
  bool shared_expert = false;
  /// The shared expert's output is scaled by sigmoid(h . ffn_gate_inp_shexp)
  /// (Qwen2-MoE); false: added as is (DeepSeek).
  bool shared_gated = true;

  // Linear attention (Qwen3-Next, Qwen3.5): Gated DeltaNet in the layers the
  // file marks recurrent (attention.recurrent_layers, or all but every
  // full_attention_interval-th), grouped-query attention in the others
  // (common/engine/transformer_delta_net.cpp, model/model_delta_net.cpp).
  bool delta_net = false;
  DeltaNetHeadOrder delta_net_heads = DeltaNetHeadOrder::kGrouped;
  /// b and a in one projection, per key head [b (r values) | a (r values)]
  /// (blk.N.ssm_ba, Qwen3-Next); false: ssm_beta and ssm_alpha (Qwen3.5).
  bool delta_net_ba_fused = false;
  /// The attention layers' q projection is doubled: per head [q | gate], and
  /// the attention output is multiplied by sigmoid(gate) before attn_output.
  bool attn_output_gate = false;
  // Llama 4.
  /// Every nope_layer_step-th layer ((l + 1) % step == 0) has no RoPE and
  /// scales its queries by the attention temperature
  /// (ModelConfig::attn_temperature_of); the other layers rotate and attend
  /// within chunks of ModelConfig::attn_chunk positions (ModelConfig::chunk_of).
  /// 0: every layer rotates, no chunks.
  int nope_layer_step = 0;
  /// q and k of the rotating layers are RMS-normed without a weight after
  /// RoPE (Llama 4's "L2 norm"; off where ModelConfig says so).
  bool rope_qk_rms_norm = false;
  /// The router picks the top-k logits and the chosen expert's weight,
  /// sigmoid(logit), scales the expert's input instead of its output
  /// (Llama 4). Top-1 only: the transformer scales the row before any
  /// executor sees it, and the executors combine with weight 1.
  bool router_input_scaled = false;

  // Hybrid Mamba-2 (Nemotron-H): each layer is one block, after its own
  // attn_norm: a Mamba-2 mixer, a grouped-query attention, or the FFN
  // (routed experts plus shared expert), as the file's per-layer
  // attention.head_count_kv and feed_forward_length say
  // (common/engine/transformer_mamba2.cpp, model/model_mamba2.cpp).
  bool mamba2 = false;
  /// Attention without positional encoding (Nemotron-H's attention layers).
  bool no_rope = false;
};

}  // namespace odmoe
