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
  kAttnQNorm,      // [head_dim] (per head) or [n_head * head_dim] (full width)
  kAttnKNorm,      // [head_dim] or [n_head_kv * head_dim]
  kAttnQBias,      // [n_head * head_dim]
  kAttnKBias,      // [n_head_kv * head_dim]
  kAttnVBias,      // [n_head_kv * head_dim]
  kAttnOutputBias,  // [n_embd]
  kFfnGateInpShexp,  // shared expert's gate: [n_embd] (one sigmoid weight per row)
  kFfnGateShexp,     // shared expert: [n_embd, n_ff_shared]
  kFfnUpShexp,       // [n_embd, n_ff_shared]
  kFfnDownShexp,     // [n_ff_shared, n_embd]
};

/// How attention normalises q and k (RMS norm before RoPE).
enum class QkNorm {
  kNone,
  kPerHead,  // each head's head_dim values, one weight vector shared by heads (Qwen3)
  kFull,     // the whole q (and k) row, a weight per element (OLMoE)
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
