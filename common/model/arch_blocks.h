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

  // The FFN of the layers with experts.
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
