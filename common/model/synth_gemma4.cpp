// odmoe-synth's Gemma 4 (synth_model.h): the keys llama.cpp's gemma4 loader
// reads (the sliding layers' pattern, head sizes, KV heads per layer and
// RoPE bases; the dense FFN's and the experts' widths; soft-capping) and a
// layer as its converter writes one: sandwich norms, the dense FFN beside
// the experts with their norms, the router's scales, the experts' gate and
// up fused in ffn_gate_up_exps, no attn_v in the full layers (V = K).
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gguf/gguf_writer.h"
#include "model/synth_model.h"
#include "util/status_macros.h"

namespace odmoe {

SynthSpec SynthSpec::Gemma4_26B_A4B() {
  SynthSpec s;
  s.arch = "gemma4";
  s.n_layer = 30;
  s.n_embd = 2816;
  s.n_ff = 704;
  s.n_ff_beside = 2112;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_head = 16;
  s.n_head_kv = 8;
  s.head_dim = 256;
  s.n_head_kv_full = 2;
  s.head_dim_full = 512;
  s.window_period = 6;
  s.sliding_window = 1024;
  s.final_logit_softcap = 30.0f;
  s.n_vocab = 262144;
  s.n_ctx = 262144;
  s.rope_theta = 1e6f;
  s.rms_eps = 1e-6f;
  s.name = "synthetic-gemma-4-26b-a4b";
  return s;
}

namespace {

bool FullLayer(const SynthSpec& s, int l) { return (l + 1) % s.window_period == 0; }

}  // namespace

absl::Status AddGemma4Keys(const SynthSpec& s, GgufWriter* w) {
  const std::string& a = s.arch;
  auto u32 = [](int v) { return GgufValue::U32(static_cast<uint32_t>(v)); };
  std::vector<bool> pattern;
  std::vector<int32_t> kv_heads;
  for (int l = 0; l < s.n_layer; ++l) {
    pattern.push_back(!FullLayer(s, l));
    kv_heads.push_back(FullLayer(s, l) ? s.n_head_kv_full : s.n_head_kv);
  }
  w->SetMetadata(a + ".attention.sliding_window_pattern",
                 GgufValue(GgufType::kArray, GgufType::kBool, pattern));
  w->SetMetadata(a + ".attention.head_count_kv", GgufValue::I32Array(kv_heads));
  w->SetMetadata(a + ".attention.key_length", u32(s.head_dim_full));
  w->SetMetadata(a + ".attention.value_length", u32(s.head_dim_full));
  w->SetMetadata(a + ".attention.key_length_swa", u32(s.head_dim));
  w->SetMetadata(a + ".attention.value_length_swa", u32(s.head_dim));
  w->SetMetadata(a + ".rope.dimension_count", u32(s.head_dim_full));
  w->SetMetadata(a + ".rope.dimension_count_swa", u32(s.head_dim));
  w->SetMetadata(a + ".rope.freq_base_swa", GgufValue::F32(10000.0f));
  w->SetMetadata(a + ".feed_forward_length", u32(s.n_ff_beside));
  w->SetMetadata(a + ".embedding_length_per_layer_input", u32(0));
  w->SetMetadata(a + ".attention.shared_kv_layers", u32(0));
  if (s.final_logit_softcap > 0) {
    w->SetMetadata(a + ".final_logit_softcapping", GgufValue::F32(s.final_logit_softcap));
  }
  // "Proportional" RoPE: a quarter of the full layers' pairs rotate.
  const int64_t half = s.head_dim_full / 2, rotated = s.head_dim_full / 8;
  return w->AddTensorGenerated("rope_freqs.weight", DType::kF32, {half},
                               [half, rotated](uint64_t offset, uint8_t* dst, size_t bytes) {
                                 for (size_t i = 0; i < bytes / sizeof(float); ++i) {
                                   const int64_t at =
                                       static_cast<int64_t>(offset / sizeof(float) + i);
                                   const float f = at < rotated ? 1.0f : 1e30f;
                                   std::memcpy(dst + i * sizeof(float), &f, sizeof(f));
                                 }
                                 (void)half;
                               });
}

absl::Status AddGemma4Layer(const SynthSpec& s, int l,
                            const std::function<absl::Status(const std::string&, DType,
                                                             std::vector<int64_t>, float)>& weight,
                            const std::function<absl::Status(const std::string&, int64_t)>& ones) {
  const std::string b = absl::StrCat("blk.", l, ".");
  const bool full = FullLayer(s, l);
  const int64_t d = s.n_embd, hd = full ? s.head_dim_full : s.head_dim;
  const int64_t q = hd * s.n_head, kv = hd * (full ? s.n_head_kv_full : s.n_head_kv);
  const int64_t ff = s.n_ff, fb = s.n_ff_beside, ne = s.n_expert;
  auto lin = [](int64_t fan_in) { return static_cast<float>(std::sqrt(3.0 / fan_in)); };
  ODMOE_RETURN_IF_ERROR(ones(b + "attn_norm.weight", d));
  ODMOE_RETURN_IF_ERROR(weight(b + "attn_q.weight", s.type, {d, q}, lin(d)));
  ODMOE_RETURN_IF_ERROR(weight(b + "attn_k.weight", s.type, {d, kv}, lin(d)));
  if (!full) ODMOE_RETURN_IF_ERROR(weight(b + "attn_v.weight", s.type, {d, kv}, lin(d)));
  ODMOE_RETURN_IF_ERROR(weight(b + "attn_output.weight", s.type, {q, d}, lin(q)));
  ODMOE_RETURN_IF_ERROR(ones(b + "attn_q_norm.weight", hd));
  ODMOE_RETURN_IF_ERROR(ones(b + "attn_k_norm.weight", hd));
  for (const char* norm : {"post_attention_norm", "ffn_norm", "post_ffw_norm", "post_ffw_norm_1",
                           "pre_ffw_norm_2", "post_ffw_norm_2"}) {
    ODMOE_RETURN_IF_ERROR(ones(absl::StrCat(b, norm, ".weight"), d));
  }
  ODMOE_RETURN_IF_ERROR(ones(b + "layer_output_scale.weight", 1));
  ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate.weight", s.type, {d, fb}, lin(d)));
  ODMOE_RETURN_IF_ERROR(weight(b + "ffn_up.weight", s.type, {d, fb}, lin(d)));
  ODMOE_RETURN_IF_ERROR(weight(b + "ffn_down.weight", s.type, {fb, d}, lin(fb)));
  ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_inp.weight", DType::kF32, {d, ne}, 1.0f));
  ODMOE_RETURN_IF_ERROR(ones(b + "ffn_gate_inp.scale", d));
  ODMOE_RETURN_IF_ERROR(ones(b + "ffn_down_exps.scale", ne));
  ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_up_exps.weight", s.type, {d, 2 * ff, ne}, lin(d)));
  return weight(b + "ffn_down_exps.weight", s.type, {ff, d, ne}, lin(ff));
}

}  // namespace odmoe
