#include "model/model_arch.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

// Tensor names of the llama family in GGUF (Llama, Mistral, Mixtral). The
// "{l}" and "{e}" fields are the layer and expert indices.
std::string_view LlamaTensorName(TensorRole role) {
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
  }
  return "";
}

constexpr std::array<ArchSpec, 1> kArchTable = {{
    // Mixtral is stored as architecture "llama" with expert_count > 0.
    {"llama", RopeMode::kInterleaved, /*requires_experts=*/true, &LlamaTensorName},
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
