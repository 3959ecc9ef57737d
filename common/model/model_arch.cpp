#include "model/model_arch.h"

#include <deque>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/arch/builtin_archs.h"
#include "util/status_macros.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

// Tensor names as GGUF files of every architecture write them (the common
// converters share one naming; ArchDesc::tensor_names lists the exceptions).
// The "{l}" and "{e}" fields are the layer and expert indices.
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
    case TensorRole::kFfnExpProbsB:
      return "blk.{l}.exp_probs_b.bias";
    case TensorRole::kAttnPostNorm:
      return "blk.{l}.post_attention_norm.weight";
    case TensorRole::kFfnPostNorm:
      return "blk.{l}.post_ffw_norm.weight";
    case TensorRole::kFfnPostNorm1:
      return "blk.{l}.post_ffw_norm_1.weight";
    case TensorRole::kFfnPreNorm2:
      return "blk.{l}.pre_ffw_norm_2.weight";
    case TensorRole::kFfnPostNorm2:
      return "blk.{l}.post_ffw_norm_2.weight";
    case TensorRole::kFfnGateInpScale:
      return "blk.{l}.ffn_gate_inp.scale";
    case TensorRole::kFfnDownExpsScale:
      return "blk.{l}.ffn_down_exps.scale";
    case TensorRole::kLayerOutputScale:
      return "blk.{l}.layer_output_scale.weight";
    case TensorRole::kRopeFreqs:
      return "rope_freqs.weight";
    case TensorRole::kFfnGateUpExps:
      return "blk.{l}.ffn_gate_up_exps.weight";
    case TensorRole::kAttnQkv:
      return "blk.{l}.attn_qkv.weight";
    case TensorRole::kAttnGate:
      return "blk.{l}.attn_gate.weight";
    case TensorRole::kSsmBa:
      return "blk.{l}.ssm_ba.weight";
    case TensorRole::kSsmBeta:
      return "blk.{l}.ssm_beta.weight";
    case TensorRole::kSsmAlpha:
      return "blk.{l}.ssm_alpha.weight";
    case TensorRole::kSsmConv1d:
      return "blk.{l}.ssm_conv1d.weight";
    case TensorRole::kSsmDtBias:
      return "blk.{l}.ssm_dt.bias";
    case TensorRole::kSsmA:
      return "blk.{l}.ssm_a";
    case TensorRole::kSsmNorm:
      return "blk.{l}.ssm_norm.weight";
    case TensorRole::kSsmOut:
      return "blk.{l}.ssm_out.weight";
    case TensorRole::kSsmIn:
      return "blk.{l}.ssm_in.weight";
    case TensorRole::kSsmConv1dBias:
      return "blk.{l}.ssm_conv1d.bias";
    case TensorRole::kSsmD:
      return "blk.{l}.ssm_d";
  }
  return "";
}

// The registry: the shipped descriptions, then those registered at run time.
// A deque keeps every description where it is while others are added.
class ArchRegistry {
 public:
  static ArchRegistry& Get() {
    static ArchRegistry* registry = new ArchRegistry();  // never destroyed
    return *registry;
  }

  const ArchDesc* Find(std::string_view name) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ArchDesc& d : descs_) {
      if (d.gguf_name == name) return &d;
    }
    return nullptr;
  }

  std::vector<std::string_view> Names() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string_view> names;
    for (const ArchDesc& d : descs_) names.push_back(d.gguf_name);
    return names;
  }

  absl::Status Add(const ArchDesc& desc) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ArchDesc& d : descs_) {
      if (d.gguf_name == desc.gguf_name) {
        return absl::AlreadyExistsError(
            absl::StrCat("architecture '", desc.gguf_name, "' is already described"));
      }
    }
    descs_.push_back(desc);
    return absl::OkStatus();
  }

 private:
  ArchRegistry() {
    for (const ArchDesc* d : kBuiltinArchs) descs_.push_back(*d);
  }

  mutable std::mutex mu_;
  std::deque<ArchDesc> descs_;
};

}  // namespace

const ArchDesc* FindArch(std::string_view gguf_name) { return ArchRegistry::Get().Find(gguf_name); }

std::vector<std::string_view> SupportedArchNames() { return ArchRegistry::Get().Names(); }

absl::Status RegisterArch(const ArchDesc& desc) {
  ODMOE_RETURN_IF_ERROR(ValidateArchDesc(desc));
  return ArchRegistry::Get().Add(desc);
}

absl::Status ValidateArchDesc(const ArchDesc& d) {
  auto bad = [&](std::string_view field, std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("architecture '", d.gguf_name, "': ", ToAbsl(field), ": ", ToAbsl(why)));
  };
  if (d.gguf_name.empty()) return bad("gguf_name", "must not be empty");
  for (const char ch : d.gguf_name) {
    if (!absl::ascii_isalnum(ch) && ch != '-' && ch != '_' && ch != '.') {
      return bad("gguf_name", "letters, digits, '-', '_' and '.' only");
    }
  }
  bool window_key = false;
  for (const ArchKey& k : d.keys) {
    if (k.suffix.empty() || k.into == nullptr || k.min > k.max) {
      return bad("keys", absl::StrCat("'", k.suffix, "' needs a suffix, a field and min <= max"));
    }
    if (k.fallback != -1 && (k.fallback < k.min || k.fallback > k.max)) {
      return bad("keys", absl::StrCat("the fallback of '", k.suffix, "' is outside its bounds"));
    }
    window_key |= k.into == &ModelConfig::sliding_window;
  }
  if (d.blocks.window_layer_shape && d.blocks.window_layers == WindowLayers::kNone) {
    return bad("blocks.window_layer_shape", "a shape of the sliding layers needs sliding layers");
  }
  if (d.blocks.window_layers != WindowLayers::kNone && !window_key) {
    return bad("keys", "sliding layers need a key read into ModelConfig::sliding_window");
  }
  const ExpertActivation& act = d.blocks.expert_activation;
  if (act.kind == ExpertActivation::Kind::kSwiGluOai && (act.alpha <= 0 || act.limit <= 0)) {
    return bad("blocks.expert_activation", "the clamped SwiGLU needs alpha > 0 and limit > 0");
  }
  for (const ArchTensorName& t : d.tensor_names) {
    if (t.name.empty()) return bad("tensor_names", "a name must not be empty");
  }
  return absl::OkStatus();
}

std::string TensorName(const ArchDesc& arch, TensorRole role, int layer, int expert) {
  std::string_view pattern = GgufTensorName(role);
  for (const ArchTensorName& t : arch.tensor_names) {
    if (t.role == role) pattern = t.name;
  }
  return absl::StrReplaceAll(ToAbsl(pattern),
                             {{"{l}", absl::StrCat(layer)}, {"{e}", absl::StrCat(expert)}});
}

std::string MetadataKey(const ArchDesc& arch, std::string_view suffix) {
  return absl::StrCat(arch.gguf_name, ".", ToAbsl(suffix));
}

}  // namespace odmoe
