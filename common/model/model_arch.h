// Table-driven model architectures: which GGUF metadata keys and tensor names
// make up a model, per architecture.
//
// A row of the table says how an architecture names its hyperparameters
// ("<arch>.block_count", ...) and tensors ("blk.%d.ffn_gate_exps.weight"),
// which RoPE variant it uses and which optional parts it has (shared experts,
// expert-weight normalisation). Adding Qwen-MoE / OLMoE / DeepSeek-style
// models means adding a row here (and, for new kinds of block, the layer
// code that uses the new roles).
//
//   const ArchSpec* spec = FindArch("llama");
//   std::string name = TensorName(*spec, TensorRole::kFfnGateExps, /*layer=*/3);
//   // "blk.3.ffn_gate_exps.weight"
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
};

/// One row of the architecture table.
struct ArchSpec {
  std::string_view gguf_name;  // general.architecture
  RopeMode rope_mode;
  bool requires_experts;  // a dense model of this arch is rejected (odmoe serves MoE only)
  /// printf-style name per role ("" = the architecture has no such tensor).
  std::string_view (*tensor_name)(TensorRole role);
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
