// ModelFile's multi-head latent attention (DeepSeek-V2): the shapes from the
// metadata and the per-layer tensors, as current llama.cpp converters write
// them (kv_b split per head into attn_k_b and attn_v_b: the absorbed form).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/gguf_checks.h"
#include "model/model_file.h"
#include "util/status_macros.h"

namespace odmoe {

absl::Status ModelFile::ReadMlaConfig() {
  const GgufFile& f = *gguf_;
  ModelConfig& c = config_;
  MlaShape& m = c.mla;
  auto key = [&](std::string_view suffix) { return MetadataKey(*arch_, suffix); };
  if (f.Find(key("attention.key_length_mla")) == nullptr) {
    return Invalid(f.path(),
                   absl::StrCat("no '", key("attention.key_length_mla"),
                                "': the file stores attention as one attn_kv_b per layer, as "
                                "llama.cpp's converter did before mid-2025; odmoe runs the "
                                "absorbed form of current files (attn_k_b / attn_v_b): convert "
                                "the model again with a current convert_hf_to_gguf.py"));
  }
  ODMOE_ASSIGN_OR_RETURN(m.kv_lora_rank, ReadInt(f, key("attention.kv_lora_rank"), 1, 1 << 14));
  ODMOE_ASSIGN_OR_RETURN(m.q_lora_rank, ReadInt(f, key("attention.q_lora_rank"), 0, 1 << 16, 0));
  ODMOE_ASSIGN_OR_RETURN(const int qk_head,
                         ReadInt(f, key("attention.key_length_mla"), 2, 1 << 14));
  ODMOE_ASSIGN_OR_RETURN(m.v_head, ReadInt(f, key("attention.value_length_mla"), 1, 1 << 14));
  m.qk_rope = c.rope_dims;
  m.qk_nope = qk_head - m.qk_rope;
  ODMOE_ASSIGN_OR_RETURN(const int value_length,
                         ReadInt(f, key("attention.value_length"), 1, 1 << 14, m.kv_lora_rank));
  if (m.qk_nope < 1 || c.head_dim != m.kv_lora_rank + m.qk_rope ||
      value_length != m.kv_lora_rank || c.n_head_kv != 1) {
    return Invalid(
        f.path(),
        absl::StrFormat("inconsistent MLA shapes: key_length %d (expected kv_lora_rank %d + "
                        "rope %d), value_length %d (expected %d), key_length_mla %d (must exceed "
                        "the rope dims), head_count_kv %d (expected 1)",
                        c.head_dim, m.kv_lora_rank, m.qk_rope, value_length, m.kv_lora_rank,
                        qk_head, c.n_head_kv));
  }
  // transformers: scaling = qk_head^-0.5 * mscale^2, mscale = 0.1 *
  // mscale_all_dim * ln(factor) + 1 under YaRN (factor > 1); GGUF stores
  // 0.1 * mscale_all_dim as yarn_log_multiplier.
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head));
  if (c.rope_scaling.type == RopeScalingType::kYarn && c.rope_scaling.factor > 1.0f) {
    ODMOE_ASSIGN_OR_RETURN(
        const float log_mul,
        ReadFloat(f, key("rope.scaling.yarn_log_multiplier"), 0.0, 100.0, 0.0));
    const double mscale = 1.0 + static_cast<double>(log_mul) * std::log(c.rope_scaling.factor);
    scale *= mscale * mscale;
  }
  c.attn_scale = static_cast<float>(scale);
  return absl::OkStatus();
}

absl::Status ModelFile::BindMlaTensors(int l, LayerTensors* t) {
  const GgufFile& f = *gguf_;
  const ModelConfig& c = config_;
  const MlaShape& m = c.mla;
  auto name = [&](TensorRole role) { return TensorName(*arch_, role, l); };
  const int64_t d = c.n_embd, h = c.n_head, r = m.kv_lora_rank;
  const int64_t q = h * m.qk_head();
  if (m.q_lora_rank > 0) {
    const int64_t ql = m.q_lora_rank;
    ODMOE_ASSIGN_OR_RETURN(t->attn_q_a, Expect(f, name(TensorRole::kAttnQA), {d, ql}));
    ODMOE_ASSIGN_OR_RETURN(t->attn_q_a_norm, Expect(f, name(TensorRole::kAttnQANorm), {ql}, true));
    ODMOE_ASSIGN_OR_RETURN(t->attn_q_b, Expect(f, name(TensorRole::kAttnQB), {ql, q}));
  } else {
    ODMOE_ASSIGN_OR_RETURN(t->attn_q, Expect(f, name(TensorRole::kAttnQ), {d, q}));
  }
  ODMOE_ASSIGN_OR_RETURN(t->attn_kv_a_mqa,
                         Expect(f, name(TensorRole::kAttnKvAMqa), {d, r + m.qk_rope}));
  ODMOE_ASSIGN_OR_RETURN(t->attn_kv_a_norm, Expect(f, name(TensorRole::kAttnKvANorm), {r}, true));
  ODMOE_ASSIGN_OR_RETURN(t->attn_k_b, Expect(f, name(TensorRole::kAttnKB), {m.qk_nope, r, h}));
  ODMOE_ASSIGN_OR_RETURN(t->attn_v_b, Expect(f, name(TensorRole::kAttnVB), {r, m.v_head, h}));
  ODMOE_ASSIGN_OR_RETURN(t->attn_output,
                         Expect(f, name(TensorRole::kAttnOutput), {h * m.v_head, d}));
  return absl::OkStatus();
}

}  // namespace odmoe
