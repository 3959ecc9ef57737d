// Table-driven model architectures: which GGUF metadata keys and tensor names
// make up a model, per architecture.
//
// A row of the table says how an architecture names its hyperparameters
// ("<arch>.block_count", ...) and tensors ("blk.%d.ffn_gate_exps.weight"),
// which RoPE variant it uses, how its attention normalises q and k, how its
// router turns logits into expert weights, where its expert width is stored
// and whether it has shared experts. Adding an architecture means adding a
// row here (and, for a new kind of block, the layer code that uses the new
// roles). The rows today:
//
//   llama     Mixtral: interleaved RoPE, top-k renormalised
//   qwen3moe  Qwen3-MoE: NeoX RoPE, per-head q/k RMS norm, top-k renormalised
//   olmoe     OLMoE: NeoX RoPE, full-width q/k RMS norm, softmax over all experts
//   qwen2moe  Qwen1.5/Qwen2-MoE: NeoX RoPE, q/k/v biases, softmax over all
//             experts, a shared expert with a sigmoid gate
//   gpt-oss   gpt-oss: NeoX YaRN RoPE (untruncated), q/k/v/o biases, attention
//             sinks, sliding windows on even layers, FFN norm named
//             post_attention_norm, router bias, experts with biases and the
//             clamped SwiGLU (alpha 1.702, limit 7)
//   deepseek2 DeepSeek-V2 / V2-Lite: multi-head latent attention (a compressed
//             KV cache of kv_lora_rank + qk_rope floats per position), YaRN
//             with the attention scale multiplied by mscale^2, interleaved
//             RoPE on the qk_rope dims, leading dense layers
//             (leading_dense_block_count), softmax over all experts without
//             renormalisation times expert_weights_scale, ungated shared
//             experts
//
//   const ArchSpec* spec = FindArch("qwen3moe");
//   std::string name = TensorName(*spec, TensorRole::kFfnGateExps, /*layer=*/3);
//   // "blk.3.ffn_gate_exps.weight"
//   bool per_head = spec->qk_norm == QkNorm::kPerHead;   // true
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace odmoe {

/// Every tensor a model may have. Per-layer roles take the layer index;
/// legacy per-expert roles take the layer and the expert index.
enum class TensorRole {
  kTokenEmbd,
  kOutputNorm,
  kOutput,
  kAttnNorm,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kFfnNorm,
  kFfnGateInp,     // router: [n_embd, n_expert]
  kFfnGateExps,    // stacked experts: [n_embd, n_ff, n_expert]
  kFfnUpExps,      // [n_embd, n_ff, n_expert]
  kFfnDownExps,    // [n_ff, n_embd, n_expert]
  kFfnGateExpert,  // older layout: one 2-D tensor per expert, [n_embd, n_ff]
  kFfnUpExpert,
  kFfnDownExpert,  // [n_ff, n_embd]
  // Optional parts (present in the architectures that have them).
  kAttnQNorm,        // [head_dim] (per head) or [n_head * head_dim] (full width)
  kAttnKNorm,        // [head_dim] or [n_head_kv * head_dim]
  kAttnQBias,        // [n_head * head_dim]
  kAttnKBias,        // [n_head_kv * head_dim]
  kAttnVBias,        // [n_head_kv * head_dim]
  kAttnOutputBias,   // [n_embd]
  kFfnGateInpShexp,  // shared expert's gate: [n_embd] (one sigmoid weight per row)
  kFfnGateShexp,     // shared expert: [n_embd, n_ff_shared]
  kFfnUpShexp,       // [n_embd, n_ff_shared]
  kFfnDownShexp,     // [n_ff_shared, n_embd]
  kAttnSinks,        // [n_head]: one sink logit per query head
  kFfnGateInpBias,   // router bias: [n_expert]
  kFfnGateExpsBias,  // stacked expert biases: [n_ff, n_expert]
  kFfnUpExpsBias,    // [n_ff, n_expert]
  kFfnDownExpsBias,  // [n_embd, n_expert]
  // A dense FFN (a layer without experts: DeepSeek's leading dense layers).
  kFfnGate,  // [n_embd, n_ff_dense]
  kFfnUp,    // [n_embd, n_ff_dense]
  kFfnDown,  // [n_ff_dense, n_embd]
  // Multi-head latent attention (DeepSeek-V2), in the absorbed form current
  // converters write (kv_b split into k_b and v_b per head).
  kAttnKvAMqa,   // [n_embd, kv_lora_rank + qk_rope]: the compressed KV and the shared rope key
  kAttnKvANorm,  // [kv_lora_rank]
  kAttnKB,       // [qk_nope, kv_lora_rank, n_head]: per head, q_nope -> latent
  kAttnVB,       // [kv_lora_rank, v_head, n_head]: per head, latent -> v
  kAttnKvB,      // [kv_lora_rank, n_head * (qk_nope + v_head)]: older files (unsplit)
  kAttnQA,       // [n_embd, q_lora_rank] (q through a low-rank bottleneck)
  kAttnQANorm,   // [q_lora_rank]
  kAttnQB,       // [q_lora_rank, n_head * (qk_nope + qk_rope)]
};

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

/// One row of the architecture table.
struct ArchSpec {
  std::string_view gguf_name;  // general.architecture
  RopeMode rope_mode;
  bool requires_experts;  // a dense model of this arch is rejected (odmoe serves MoE only)
  /// printf-style name per role ("" = the architecture has no such tensor).
  std::string_view (*tensor_name)(TensorRole role);
  QkNorm qk_norm;
  /// RouterGating::normalize unless the file says "<arch>.expert_weights_norm".
  bool router_normalize;
  /// Metadata suffix of one routed expert's hidden width; "" = the
  /// architecture stores it as "feed_forward_length".
  std::string_view expert_ff_key;
  /// The architecture has a shared expert per layer (ffn_*_shexp), run for
  /// every row next to the routed ones, and its sigmoid gate.
  bool shared_expert;
  /// The expert activation; the architecture's constants (not in the GGUF).
  ExpertActivation expert_activation = {};
  /// Per-head attention sinks (blk.N.attn_sinks.weight) in every layer.
  bool attn_sinks = false;
  /// Which layers slide (the window size is read from the file).
  WindowLayers window_layers = WindowLayers::kNone;
  /// The router has a bias (blk.N.ffn_gate_inp.bias), added to its logits
  /// before the top-k.
  bool router_bias = false;
  /// Every expert has gate / up / down biases (blk.N.ffn_*_exps.bias).
  bool expert_bias = false;
  /// YaRN's `truncate` (round the correction range outward) when the file
  /// asks for YaRN; GGUF has no key for it.
  bool yarn_truncate = true;
  AttentionKind attention = AttentionKind::kGrouped;
  /// The shared expert's output is scaled by sigmoid(h . ffn_gate_inp_shexp)
  /// (Qwen2-MoE); false: added as is (DeepSeek).
  bool shared_expert_gated = true;
};

/// The row for a general.architecture value, or nullptr.
const ArchSpec* FindArch(std::string_view gguf_name);

/// Names of every supported architecture (for error messages).
std::vector<std::string_view> SupportedArchNames();

/// The concrete tensor name for a role ("" if the architecture lacks it).
std::string TensorName(const ArchSpec& spec, TensorRole role, int layer = -1, int expert = -1);

/// "<arch>.<suffix>", e.g. MetadataKey(spec, "expert_count") = "llama.expert_count".
std::string MetadataKey(const ArchSpec& spec, std::string_view suffix);

}  // namespace odmoe
