#include "model/model_arch.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

// Tensor names as GGUF files of every architecture in the table write them
// (the common converters share one naming). The "{l}" and "{e}" fields are
// the layer and expert indices.
std::string_view GgufTensorName(TensorRole role) {
  switch (role) {
    case TensorRole::kTokenEmbd:
      return "token_embd.weight";
    case TensorRole::kOutputNorm:
      return "output_norm.weight";
    case TensorRole::kOutput:
      return "output.weight";
    case TensorRole::kAttnNorm:
      return "blk.{l}.attn_norm.weight";
    case TensorRole::kAttnQ:
      return "blk.{l}.attn_q.weight";
    case TensorRole::kAttnK:
      return "blk.{l}.attn_k.weight";
    case TensorRole::kAttnV:
      return "blk.{l}.attn_v.weight";
    case TensorRole::kAttnOutput:
      return "blk.{l}.attn_output.weight";
    case TensorRole::kFfnNorm:
      return "blk.{l}.ffn_norm.weight";
    case TensorRole::kFfnGateInp:
      return "blk.{l}.ffn_gate_inp.weight";
    case TensorRole::kFfnGateExps:
      return "blk.{l}.ffn_gate_exps.weight";
    case TensorRole::kFfnUpExps:
      return "blk.{l}.ffn_up_exps.weight";
    case TensorRole::kFfnDownExps:
      return "blk.{l}.ffn_down_exps.weight";
    case TensorRole::kFfnGateExpert:
      return "blk.{l}.ffn_gate.{e}.weight";
    case TensorRole::kFfnUpExpert:
      return "blk.{l}.ffn_up.{e}.weight";
    case TensorRole::kFfnDownExpert:
      return "blk.{l}.ffn_down.{e}.weight";
    case TensorRole::kAttnQNorm:
      return "blk.{l}.attn_q_norm.weight";
    case TensorRole::kAttnKNorm:
      return "blk.{l}.attn_k_norm.weight";
    case TensorRole::kAttnQBias:
      return "blk.{l}.attn_q.bias";
    case TensorRole::kAttnKBias:
      return "blk.{l}.attn_k.bias";
    case TensorRole::kAttnVBias:
      return "blk.{l}.attn_v.bias";
    case TensorRole::kAttnOutputBias:
      return "blk.{l}.attn_output.bias";
    case TensorRole::kFfnGateInpShexp:
      return "blk.{l}.ffn_gate_inp_shexp.weight";
    case TensorRole::kFfnGateShexp:
      return "blk.{l}.ffn_gate_shexp.weight";
    case TensorRole::kFfnUpShexp:
      return "blk.{l}.ffn_up_shexp.weight";
    case TensorRole::kFfnDownShexp:
      return "blk.{l}.ffn_down_shexp.weight";
    case TensorRole::kAttnSinks:
      return "blk.{l}.attn_sinks.weight";
    case TensorRole::kFfnGateInpBias:
      return "blk.{l}.ffn_gate_inp.bias";
    case TensorRole::kFfnGateExpsBias:
      return "blk.{l}.ffn_gate_exps.bias";
    case TensorRole::kFfnUpExpsBias:
      return "blk.{l}.ffn_up_exps.bias";
    case TensorRole::kFfnDownExpsBias:
      return "blk.{l}.ffn_down_exps.bias";
    case TensorRole::kFfnGate:
      return "blk.{l}.ffn_gate.weight";
    case TensorRole::kFfnUp:
      return "blk.{l}.ffn_up.weight";
    case TensorRole::kFfnDown:
      return "blk.{l}.ffn_down.weight";
    case TensorRole::kAttnKvAMqa:
      return "blk.{l}.attn_kv_a_mqa.weight";
    case TensorRole::kAttnKvANorm:
      return "blk.{l}.attn_kv_a_norm.weight";
    case TensorRole::kAttnKB:
      return "blk.{l}.attn_k_b.weight";
    case TensorRole::kAttnVB:
      return "blk.{l}.attn_v_b.weight";
    case TensorRole::kAttnKvB:
      return "blk.{l}.attn_kv_b.weight";
    case TensorRole::kAttnQA:
      return "blk.{l}.attn_q_a.weight";
    case TensorRole::kAttnQANorm:
      return "blk.{l}.attn_q_a_norm.weight";
    case TensorRole::kAttnQB:
      return "blk.{l}.attn_q_b.weight";
  }
  return "";
}

// gpt-oss names its FFN norm "post_attention_norm"; everything else as above.
std::string_view GptOssTensorName(TensorRole role) {
  if (role == TensorRole::kFfnNorm) return "blk.{l}.post_attention_norm.weight";
  return GgufTensorName(role);
}

// The routing and attention facts of each row are those of the reference
// implementations (Hugging Face transformers' modeling files): Qwen3-MoE
// ships norm_topk_prob = true, OLMoE and Qwen1.5/2-MoE false; gpt-oss takes
// the top-k of the biased router logits and a softmax over those k, clamps
// its SwiGLU at 7 with alpha 1.702 (llama.cpp hard-codes the same), slides
// its even layers (transformers' default layer_types) and computes YaRN
// with truncate = false.
constexpr std::array<ArchSpec, 6> kArchTable = {{
    // Mixtral is stored as architecture "llama" with expert_count > 0.
    {"llama", RopeMode::kInterleaved, /*requires_experts=*/true, &GgufTensorName, QkNorm::kNone,
     /*router_normalize=*/true, /*expert_ff_key=*/"", /*shared_expert=*/false},
    {"qwen3moe", RopeMode::kHalf, true, &GgufTensorName, QkNorm::kPerHead, true,
     "expert_feed_forward_length", false},
    {"olmoe", RopeMode::kHalf, true, &GgufTensorName, QkNorm::kFull, false, "", false},
    {"qwen2moe", RopeMode::kHalf, true, &GgufTensorName, QkNorm::kNone, false,
     "expert_feed_forward_length", true},
    {"gpt-oss", RopeMode::kHalf, true, &GptOssTensorName, QkNorm::kNone, true,
     "expert_feed_forward_length", false,
     /*expert_activation=*/{ExpertActivation::Kind::kSwiGluOai, 1.702f, 7.0f},
     /*attn_sinks=*/true, /*window_layers=*/WindowLayers::kEven, /*router_bias=*/true,
     /*expert_bias=*/true, /*yarn_truncate=*/false},
    // DeepSeek-V2's routing: softmax over all experts, top-k, no
    // renormalisation (norm_topk_prob false), times routed_scaling_factor.
    {"deepseek2", RopeMode::kInterleaved, true, &GgufTensorName, QkNorm::kNone, false,
     "expert_feed_forward_length", /*shared_expert=*/true, /*expert_activation=*/{},
     /*attn_sinks=*/false, WindowLayers::kNone, /*router_bias=*/false, /*expert_bias=*/false,
     /*yarn_truncate=*/true, AttentionKind::kMla, /*shared_expert_gated=*/false},
}};

}  // namespace

const ArchSpec* FindArch(std::string_view gguf_name) {
  for (const ArchSpec& spec : kArchTable) {
    if (spec.gguf_name == gguf_name) return &spec;
  }
  return nullptr;
}

std::vector<std::string_view> SupportedArchNames() {
  std::vector<std::string_view> names;
  for (const ArchSpec& spec : kArchTable) names.push_back(spec.gguf_name);
  return names;
}

std::string TensorName(const ArchSpec& spec, TensorRole role, int layer, int expert) {
  return absl::StrReplaceAll(ToAbsl(spec.tensor_name(role)),
                             {{"{l}", absl::StrCat(layer)}, {"{e}", absl::StrCat(expert)}});
}

std::string MetadataKey(const ArchSpec& spec, std::string_view suffix) {
  return absl::StrCat(ToAbsl(spec.gguf_name), ".", ToAbsl(suffix));
}

}  // namespace odmoe
