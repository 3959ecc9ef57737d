// Model architectures: one description per architecture, with named fields,
// and the registry that finds one by its GGUF name.
//
// A description (ArchDesc) says everything odmoe knows about an
// architecture that a GGUF file does not say: its name
// (general.architecture), the blocks of its layers (ArchBlocks: attention
// kind, RoPE layout, q/k norms, sinks, sliding layers, router and expert
// biases, expert activation, shared expert), how its router weighs the
// chosen experts unless the file says otherwise, where its hyperparameters
// live beyond the keys every architecture shares, the tensors whose names
// differ from the common GGUF naming, and the attention biases its files
// carry. ModelFile (model_file.h) reads a file through it: the common keys,
// then the description's, then the tensors each block needs; ArchBlocks is
// copied whole into ModelConfig.
//
// Each shipped architecture is one file, common/model/arch/<name>.cpp
// (qwen2moe.cpp, gpt_oss.cpp, ...), listed in arch/builtin_archs.h; the
// table of docs/models.md says what each one is.
//
// Which tensors a model has follows from its blocks; their shapes from its
// hyperparameters (ModelFile binds and checks them, block by block); their
// names are the common GGUF ones but for the description's exceptions.
//
// A variant of a known family is a new description and nothing else (its
// file and its line in arch/builtin_archs.h); a test or a tool may also
// register one at run time:
//
//   ArchDesc d = *FindArch("qwen2moe");
//   d.gguf_name = "testmoe";
//   ODMOE_RETURN_IF_ERROR(RegisterArch(d));   // ModelFile::Open now reads testmoe files
//
//   const ArchDesc* a = FindArch("gpt-oss");
//   std::string n = TensorName(*a, TensorRole::kFfnNorm, /*layer=*/3);
//   // "blk.3.post_attention_norm.weight"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "model/arch_blocks.h"
#include "model/model_config.h"

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
  // DeepSeek-V3's routing: a per-expert bias added to the sigmoid scores for
  // the choice only (HF e_score_correction_bias).
  kFfnExpProbsB,  // [n_expert]
  // Gemma 4: the sandwich norms, the dense FFN beside the experts, the
  // router's scales, the layer's output scale, the full layers' RoPE factors.
  kAttnPostNorm,      // [n_embd]
  kFfnPostNorm,       // [n_embd]
  kFfnPostNorm1,      // [n_embd]: after the dense FFN
  kFfnPreNorm2,       // [n_embd]: the experts' input norm
  kFfnPostNorm2,      // [n_embd]: after the experts
  kFfnGateInpScale,   // [n_embd]: the router's input scale
  kFfnDownExpsScale,  // [n_expert]: a weight factor per expert
  kLayerOutputScale,  // [1]
  kRopeFreqs,         // [head_dim / 2] (one tensor, not per layer)
  kFfnGateUpExps,     // [n_embd, 2 n_ff, n_expert]: gate rows, then up rows, per expert
  // Gated DeltaNet (ArchBlocks::delta_net), in the recurrent layers.
  kAttnQkv,     // [n_embd, conv_dim]: q (all k heads), k, v (all v heads)
  kAttnGate,    // [n_embd, value_dim]: z, the output norm's gate
  kSsmBa,       // [n_embd, 2 * n_v_heads]: per k head [b | a] (delta_net_ba_fused)
  kSsmBeta,     // [n_embd, n_v_heads]: b (beta = sigmoid(b))
  kSsmAlpha,    // [n_embd, n_v_heads]: a (the decay's input)
  kSsmConv1d,   // F32 [conv_kernel, conv_dim]
  kSsmDtBias,   // F32 [n_v_heads]: added to a before the softplus
  kSsmA,        // F32 [n_v_heads]: -exp(A_log), as the converter stores it
  kSsmNorm,     // F32 [head_v]: the gated output norm's weight
  kSsmOut,      // [value_dim, n_embd]
  // Mamba-2 (ArchBlocks::mamba2), in its kMamba2 layers; also kSsmConv1d
  // (F32 [conv_kernel, conv_dim]), kSsmDtBias, kSsmA ([1, n_heads]),
  // kSsmNorm ([inner / n_groups, n_groups]) and kSsmOut ([inner, n_embd]).
  kSsmIn,          // [n_embd, in_proj]: z, x, B, C, dt
  kSsmConv1dBias,  // F32 [conv_dim]
  kSsmD,           // F32 [1, n_heads]: the skip connection's weight per head
};

/// An integer hyperparameter of one architecture, "<arch>.<suffix>", read
/// into a ModelConfig field after the keys every architecture shares.
struct ArchKey {
  std::string suffix = {};  // e.g. "attention.sliding_window"
  int64_t min = 0;          // bounds of the value (inclusive)
  int64_t max = 0;
  int64_t fallback = -1;             // the value when the file lacks the key; -1: required
  int ModelConfig::*into = nullptr;  // e.g. &ModelConfig::sliding_window
};

/// A tensor whose name differs from the common GGUF naming (TensorName):
/// "{l}" stands for the layer and "{e}" for the expert.
struct ArchTensorName {
  TensorRole role;
  std::string name;  // e.g. "blk.{l}.post_attention_norm.weight"
};

/// The attention biases an architecture's files carry. The loader reads
/// whatever biases a file has (every layer alike, decided by layer 0); this
/// says what the converters write, so odmoe-synth writes the same.
enum class AttnBiases {
  kNone,
  kQkv,   // attn_{q,k,v}.bias (Qwen2-MoE)
  kQkvo,  // and attn_output.bias (gpt-oss)
};

/// One architecture, described once. Fields in the order a reader needs them;
/// every one but gguf_name has the default of a plain Mixtral-style model.
struct ArchDesc {
  std::string gguf_name = {};  // general.architecture
  std::string models = {};     // the published models stored as it (docs, messages)

  /// What its layers are made of (copied whole into ModelConfig).
  ArchBlocks blocks = {};
  AttnBiases attn_biases = AttnBiases::kNone;

  /// Routing: the top-k weights renormalised over the chosen experts unless
  /// the file says "<arch>.expert_weights_norm" (RouterGating::normalize).
  bool router_normalize = true;
  /// The router's scores unless the file says "<arch>.expert_gating_func"
  /// (1 softmax, 2 sigmoid: RouterGating::score). With sigmoid scores a
  /// file's blk.N.exp_probs_b.bias and expert groups are used (model_file.cpp).
  RouterScore router_score = RouterScore::kSoftmax;
  /// A file without experts (expert_count < 2) is refused: odmoe serves
  /// Mixture-of-Experts models only.
  bool requires_experts = true;

  /// Suffix of one routed expert's hidden width when the file has it; else
  /// (and when empty) "feed_forward_length".
  std::string expert_ff_key = {};
  /// Keys of this architecture beyond the shared ones (model_file.cpp).
  std::vector<ArchKey> keys = {};
  /// The q/k norms of blocks.qk_norm may be absent from a file (GLM-4.5's
  /// use_qk_norm): decided by layer 0, every layer alike; absent: none.
  bool qk_norm_optional = false;
  /// YaRN's `truncate` (round the correction range outward) when the file
  /// asks for YaRN; GGUF has no key for it.
  bool yarn_truncate = true;

  /// Tensors named otherwise than the common GGUF naming.
  std::vector<ArchTensorName> tensor_names = {};

  /// With ArchBlocks::nope_layer_step: "<arch>.attention.temperature_scale"
  /// when the file lacks it (Llama 4: 0.1).
  float attn_temp_scale = 0.0f;
  /// Files with this many experts have no rope_qk_rms_norm (Llama 4
  /// Maverick, as llama.cpp decides); 0: none.
  int rope_qk_norm_off_expert_count = 0;
};

/// The description for a general.architecture value, or nullptr. The
/// pointer stays valid for the life of the process.
const ArchDesc* FindArch(std::string_view gguf_name);

/// Names of every known architecture, shipped ones first (for messages).
std::vector<std::string_view> SupportedArchNames();

/// Adds an architecture at run time (thread-safe). INVALID_ARGUMENT when the
/// description is inconsistent (ValidateArchDesc), ALREADY_EXISTS when its
/// name is taken.
absl::Status RegisterArch(const ArchDesc& desc);

/// INVALID_ARGUMENT naming the field when a description cannot describe a
/// model odmoe runs (e.g. sliding layers without a key for the window).
absl::Status ValidateArchDesc(const ArchDesc& desc);

/// The concrete tensor name for a role ("blk.3.ffn_norm.weight").
std::string TensorName(const ArchDesc& arch, TensorRole role, int layer = -1, int expert = -1);

/// "<arch>.<suffix>", e.g. MetadataKey(arch, "expert_count") = "llama.expert_count".
std::string MetadataKey(const ArchDesc& arch, std::string_view suffix);

}  // namespace odmoe
