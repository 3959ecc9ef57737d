// ModelFile's Gated DeltaNet (Qwen3-Next, Qwen3.5): the shapes from the
// ssm.* keys, which layers are recurrent, and a recurrent layer's tensors
// as llama.cpp's converters write them (attn_qkv / attn_gate split from the
// checkpoint's in_proj_qkvz; ssm_ba fused or ssm_beta + ssm_alpha; ssm_a
// holding -exp(A_log); ssm_dt.bias holding dt_bias).
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/gguf_checks.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status ModelFile::ReadDeltaNetConfig() {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  DeltaNetShape& s = c.delta;
  auto key = [&](std::string_view suffix) { return MetadataKey(*arch_, suffix); };
  ODMOE_ASSIGN_OR_RETURN(s.conv_kernel, ReadInt(f, key("ssm.conv_kernel"), 2, 8));
  ODMOE_ASSIGN_OR_RETURN(s.head_k, ReadInt(f, key("ssm.state_size"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(s.n_k_heads, ReadInt(f, key("ssm.group_count"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(s.n_v_heads, ReadInt(f, key("ssm.time_step_rank"), 1, 4096));
  ODMOE_ASSIGN_OR_RETURN(const int inner, ReadInt(f, key("ssm.inner_size"), 1, 1 << 20));
  if (inner % s.n_v_heads != 0 || s.n_v_heads % s.n_k_heads != 0) {
    return Invalid(f.path(),
                   absl::StrFormat("inconsistent Gated DeltaNet shapes: '%s' %d must be a multiple "
                                   "of '%s' %d, itself a multiple of '%s' %d",
                                   key("ssm.inner_size"), inner, key("ssm.time_step_rank"),
                                   s.n_v_heads, key("ssm.group_count"), s.n_k_heads));
  }
  s.head_v = inner / s.n_v_heads;
  if (s.head_v != s.head_k) {  // llama.cpp's state is square: head_v = head_k = state_size
    return Invalid(f.path(), absl::StrFormat("Gated DeltaNet value heads of %d (inner_size / "
                                             "time_step_rank) differ from key heads of %d "
                                             "('%s'): not supported",
                                             s.head_v, s.head_k, key("ssm.state_size")));
  }
  // Which layers are recurrent: the file's list, else all but every
  // full_attention_interval-th.
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (const GgufValue* v = f.Find(key("attention.recurrent_layers"))) {
    const auto* flags = std::get_if<std::vector<bool>>(&v->storage());
    std::optional<std::vector<int32_t>> ints = v->AsI32Array();
    const size_t n = flags ? flags->size() : ints ? ints->size() : 0;
    if (n < static_cast<size_t>(c.n_layer)) {
      return Invalid(f.path(), absl::StrCat("'", key("attention.recurrent_layers"),
                                            "' must be an array of at least block_count (",
                                            c.n_layer, ") bools"));
    }
    for (int l = 0; l < c.n_layer; ++l) {
      const size_t i = static_cast<size_t>(l);
      c.recurrent_layers[i] = flags ? static_cast<uint8_t>((*flags)[i]) : (*ints)[i] != 0;
    }
  } else {
    ODMOE_ASSIGN_OR_RETURN(const int interval,
                           ReadInt(f, key("full_attention_interval"), 1, 4096, 4));
    for (int l = 0; l < c.n_layer; ++l) {
      c.recurrent_layers[static_cast<size_t>(l)] = (l + 1) % interval != 0;
    }
  }
  return absl::OkStatus();
}

absl::Status ModelFile::BindDeltaNetTensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  const ModelConfig& c = config_;
  const DeltaNetShape& s = c.delta;
  auto name = [&](TensorRole role) { return TensorName(*arch_, role, l); };
  const int64_t d = c.n_embd, nv = s.n_v_heads;
  ODMOE_ASSIGN_OR_RETURN(t->attn_qkv, Expect(f, name(TensorRole::kAttnQkv), {d, s.conv_dim()}));
  ODMOE_ASSIGN_OR_RETURN(t->attn_gate, Expect(f, name(TensorRole::kAttnGate), {d, s.value_dim()}));
  if (c.delta_net_ba_fused) {
    ODMOE_ASSIGN_OR_RETURN(t->ssm_ba, Expect(f, name(TensorRole::kSsmBa), {d, 2 * nv}));
  } else {
    ODMOE_ASSIGN_OR_RETURN(t->ssm_beta, Expect(f, name(TensorRole::kSsmBeta), {d, nv}));
    ODMOE_ASSIGN_OR_RETURN(t->ssm_alpha, Expect(f, name(TensorRole::kSsmAlpha), {d, nv}));
  }
  ODMOE_ASSIGN_OR_RETURN(
      t->ssm_conv1d, Expect(f, name(TensorRole::kSsmConv1d), {s.conv_kernel, s.conv_dim()}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_dt_bias, Expect(f, name(TensorRole::kSsmDtBias), {nv}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_a, Expect(f, name(TensorRole::kSsmA), {nv}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_norm, Expect(f, name(TensorRole::kSsmNorm), {s.head_v}, true));
  ODMOE_ASSIGN_OR_RETURN(t->ssm_out, Expect(f, name(TensorRole::kSsmOut), {s.value_dim(), d}));
  return absl::OkStatus();
}

}  // namespace odmoe
