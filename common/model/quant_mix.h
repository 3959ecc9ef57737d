// Quantization mixes: which storage type each tensor of a model gets when a
// file is quantized to "Q4_K_M", "Q8_0", "MXFP4_MOE", ... (the file-level
// names users know from the GGUF ecosystem's quantizer), as two tables:
//
//   * the rule table (quant_mix.cpp, kMixRules): (mixes, tensor role, layer
//     span, model trait) -> type; the first rule that matches a tensor wins,
//     else the mix's base type. The facts are those of llama.cpp's
//     llama_tensor_get_type for a model without an importance matrix: the LM
//     head Q6_K in every quantized mix but Q8_0 / MXFP4_MOE (Q8_0 there);
//     token embeddings tied to the head follow the head; attn_v and ffn_down
//     at more bits in some layers of the _M / _S / Q2_K / Q3_K / IQ4 mixes;
//     attn_v, attn_k at Q8_0 and attn_output at Q5_K for 8-expert models;
//     MXFP4_MOE: experts MXFP4, everything else Q8_0.
//   * the fallback table (kFallbacks): a type a tensor's rows cannot hold
//     (a row length that is not a whole number of the type's blocks, e.g.
//     rows of 128 for the 256-element K family) is replaced by its fallback,
//     repeatedly, F16 last: Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1;
//     Q6_K -> Q8_0; IQ4_XS -> IQ4_NL; any other -> F16.
//
// Norms (1-D) and the router (ffn_gate_inp) are never converted. A "pure"
// recipe (QuantRecipe::Pure: the shadow node's copy) gives every converted
// tensor one type, with the same fallbacks.
//
// Differences from llama.cpp, on purpose: no rule depends on the model's
// parameter count (its 70B attn_v rule); MXFP4_MOE picks experts by role,
// so per-expert (2-D) expert tensors get MXFP4 too.
//
//   std::optional<QuantRecipe> r = ParseQuantRecipe("q4_k_m");
//   MixModel m = MixModelOf(model.config());
//   TypeChoice c = ChooseType(*r, m, {MixRole::kFfnDown, /*layer=*/0, /*row=*/14336});
//   // c.type == DType::kQ6_K (layer 0 of 32 is a "more bits" layer)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_arch.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace odmoe {

/// The file-level mixes (llama.cpp's "ftype" names).
enum class QuantMix {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kIQ4_NL,
  kIQ4_XS,
  kMXFP4_MOE,
  kQ2_K,
  kQ3_K_S,
  kQ3_K_M,
  kQ3_K_L,
  kQ4_K_S,
  kQ4_K_M,
  kQ5_K_S,
  kQ5_K_M,
  kQ6_K,
};

/// One row of the mix table.
struct QuantMixInfo {
  QuantMix mix;
  std::string_view name;  // "Q4_K_M" (parsing is case-insensitive)
  uint32_t file_type;     // general.file_type (llama.cpp's llama_ftype id)
  DType base;             // the type of every tensor no rule names
};

/// Every mix, in the table's order.
const std::vector<QuantMixInfo>& QuantMixes();
const QuantMixInfo& MixInfo(QuantMix mix);

/// What a tensor is, for the rules.
enum class MixRole {
  kTokenEmbd,
  kOutput,  // the LM head (token_embd too when the head is tied to it)
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kFfnGate,  // expert matrices, stacked or per expert
  kFfnUp,
  kFfnDown,
  kOther,  // any other 2-D / 3-D weight: the base type
  kKept,   // norms, router: never converted
};

/// The model facts the rules depend on.
struct MixModel {
  int n_layer = 1;
  int n_expert = 0;
  int n_head = 1;
  int n_head_kv = 1;
  bool output_tied = false;
  int gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};
MixModel MixModelOf(const ModelConfig& config);

/// One tensor to place.
struct MixTensor {
  MixRole role = MixRole::kKept;
  int layer = -1;          // per-layer roles
  int64_t row_length = 0;  // ne[0]
};

/// A mix, or one type for every converted tensor (pure).
struct QuantRecipe {
  bool pure = false;
  QuantMix mix = QuantMix::kQ8_0;  // !pure
  DType type = DType::kQ8_0;       // pure
  static QuantRecipe Mix(QuantMix m) { return {false, m, MixInfo(m).base}; }
  static QuantRecipe Pure(DType t) { return {true, QuantMix::kQ8_0, t}; }
  /// "Q4_K_M", or "pure q4_K".
  std::string Name() const;
  /// general.file_type of the result: the mix's id; for pure, the id of the
  /// mix named after the type (q4_K -> Q4_K_M, q5_K -> Q5_K_M, ...).
  uint32_t FileType() const;
};

/// "Q4_K_M", "q8_0", "mxfp4_moe", ... (case-insensitive). Plain type names
/// that are also mix names (q8_0, q4_0, f16, ...) are mixes.
std::optional<QuantRecipe> ParseQuantRecipe(std::string_view name);
/// "F32, F16, ..., Q6_K": every mix name, for help and error messages.
std::string QuantMixNames();

/// The type a tensor gets.
struct TypeChoice {
  DType type = DType::kF32;    // what is written (after fallbacks)
  DType wanted = DType::kF32;  // what the rules asked for
  bool convert = false;        // false: the tensor is copied as it is (kKept)
  bool fell_back() const { return convert && type != wanted; }
};
TypeChoice ChooseType(const QuantRecipe& recipe, const MixModel& model, const MixTensor& tensor);

/// The fallback of a type whose blocks a row cannot hold (F16 for types
/// without a closer one; F16 and F32 have none: they hold any row).
DType FallbackType(DType type);

/// A tensor of a model by name, with its role (MixTensorsOf lists every
/// tensor a model of this configuration has, in the model file's terms).
struct NamedMixTensor {
  std::string name;
  MixTensor tensor;
};
std::vector<NamedMixTensor> MixTensorsOf(const ArchDesc& arch, const ModelConfig& config);

}  // namespace odmoe
