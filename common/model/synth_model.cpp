#include "model/synth_model.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gguf/gguf_writer.h"
#include "model/model_arch.h"
#include "tensor/quant.h"
#include "util/fp16.h"
#include "util/status_macros.h"
#include "util/string_view.h"

namespace odmoe {

// Gemma 4's keys and layers (synth_gemma4.cpp).
absl::Status AddGemma4Keys(const SynthSpec& s, GgufWriter* w);
absl::Status AddGemma4Layer(const SynthSpec& s, int l,
                            const std::function<absl::Status(const std::string&, DType,
                                                             std::vector<int64_t>, float)>& weight,
                            const std::function<absl::Status(const std::string&, int64_t)>& ones);

namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t NameHash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// How one tensor's values are made: uniform in [-scale, scale] (a negative
// scale: in (scale, 0]) from a
// counter-based generator (the same bytes whatever the chunking), or constant.
struct Fill {
  uint64_t stream = 0;
  float scale = 0;
  float constant = 0;
  bool random = true;
  float At(uint64_t i) const {
    if (!random) return constant;
    const double u = static_cast<double>(SplitMix(stream + i) >> 11) * 0x1.0p-53;  // [0, 1)
    if (scale < 0) return static_cast<float>(u * scale);  // one-sided: (scale, 0]
    return static_cast<float>((2 * u - 1) * scale);
  }
};

// A generator for GgufWriter: rows of ne0 floats converted to `type`.
GgufWriter::Generator Rows(DType type, int64_t ne0, Fill fill) {
  return [type, ne0, fill](uint64_t offset, uint8_t* dst, size_t bytes) {
    const size_t row_bytes = RowBytes(type, ne0);
    std::vector<float> row(static_cast<size_t>(ne0));
    for (size_t done = 0; done < bytes; done += row_bytes) {
      const uint64_t first = (offset + done) / row_bytes * static_cast<uint64_t>(ne0);
      for (int64_t i = 0; i < ne0; ++i) row[static_cast<size_t>(i)] = fill.At(first + i);
      uint8_t* out = dst + done;
      if (type == DType::kF32) {
        std::memcpy(out, row.data(), row_bytes);
      } else if (type == DType::kF16) {
        auto* h = reinterpret_cast<uint16_t*>(out);
        for (int64_t i = 0; i < ne0; ++i) h[i] = F32ToF16(row[static_cast<size_t>(i)]);
      } else {
        QuantizeRow(type, row.data(), out, ne0);
      }
    }
  };
}

using WeightFn =
    std::function<absl::Status(const std::string&, DType, std::vector<int64_t>, float)>;

// A Gated DeltaNet layer's tensors as llama.cpp's converter names them; the
// decays' a (-exp(A_log)) uniform in [-1, 0), so exp(a * softplus) < 1.
absl::Status AddDeltaNetTensors(const SynthSpec& s, const ArchDesc& spec, int l,
                                const WeightFn& weight) {
  const int64_t d = s.n_embd, nv = s.ssm_v_heads, hk = s.ssm_head;
  const int64_t value = nv * hk, conv = 2 * s.ssm_k_heads * hk + value;
  auto name = [&](TensorRole role) { return TensorName(spec, role, l); };
  auto lin = [](int64_t fan_in) { return static_cast<float>(std::sqrt(3.0 / fan_in)); };
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kAttnQkv), s.type, {d, conv}, lin(d)));
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kAttnGate), s.type, {d, value}, lin(d)));
  if (spec.blocks.delta_net_ba_fused) {
    ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmBa), s.type, {d, 2 * nv}, lin(d)));
  } else {
    ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmBeta), s.type, {d, nv}, lin(d)));
    ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmAlpha), s.type, {d, nv}, lin(d)));
  }
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmConv1d), DType::kF32, {s.ssm_conv_kernel, conv},
                               lin(s.ssm_conv_kernel)));
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmDtBias), DType::kF32, {nv}, 0.5f));
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmA), DType::kF32, {nv}, -1.0f));
  ODMOE_RETURN_IF_ERROR(weight(name(TensorRole::kSsmNorm), DType::kF32, {hk}, 1.0f));
  return weight(name(TensorRole::kSsmOut), s.type, {value, d}, lin(value));
}

absl::Status Build(const SynthSpec& s, GgufWriter* w) {
  ODMOE_RETURN_IF_ERROR(ValidateSynthSpec(s));
  const std::string& a = s.arch;
  const ArchDesc& spec = *FindArch(a);
  const ArchBlocks& blocks = spec.blocks;
  w->SetMetadata("general.architecture", GgufValue::String(a));
  w->SetMetadata("general.name", GgufValue::String(s.name));
  w->SetMetadata("odmoe.synthetic", GgufValue::Bool(true));
  w->SetMetadata("odmoe.synthetic_seed", GgufValue::U64(s.seed));
  w->SetMetadata(a + ".context_length", GgufValue::U32(static_cast<uint32_t>(s.n_ctx)));
  w->SetMetadata(a + ".embedding_length", GgufValue::U32(static_cast<uint32_t>(s.n_embd)));
  w->SetMetadata(a + ".block_count", GgufValue::U32(static_cast<uint32_t>(s.n_layer)));
  const bool mla = blocks.attention == AttentionKind::kMla;
  const int ff_key = s.n_dense_leading > 0 || s.moe_layer_step > 1 ? s.n_ff_dense : s.n_ff;
  w->SetMetadata(a + ".feed_forward_length", GgufValue::U32(static_cast<uint32_t>(ff_key)));
  if (s.n_dense_leading > 0) {
    w->SetMetadata(a + ".leading_dense_block_count",
                   GgufValue::U32(static_cast<uint32_t>(s.n_dense_leading)));
  }
  if (s.moe_layer_step > 0) {  // llama4
    w->SetMetadata(a + ".interleave_moe_layer_step",
                   GgufValue::U32(static_cast<uint32_t>(s.moe_layer_step)));
  }
  if (mla) {  // the keys current llama.cpp converters write for DeepSeek-V2
    auto u32 = [](int v) { return GgufValue::U32(static_cast<uint32_t>(v)); };
    w->SetMetadata(a + ".attention.kv_lora_rank", u32(s.kv_lora_rank));
    w->SetMetadata(a + ".attention.key_length", u32(s.kv_lora_rank + s.qk_rope));
    w->SetMetadata(a + ".attention.value_length", u32(s.kv_lora_rank));
    w->SetMetadata(a + ".attention.key_length_mla", u32(s.qk_nope + s.qk_rope));
    w->SetMetadata(a + ".attention.value_length_mla", u32(s.v_head));
    w->SetMetadata(a + ".rope.dimension_count", u32(s.qk_rope));
    w->SetMetadata(a + ".expert_shared_count", u32(s.n_ff_shared / s.n_ff));
    w->SetMetadata(a + ".expert_weights_scale", GgufValue::F32(1.0f));
    w->SetMetadata(a + ".expert_gating_func", u32(s.sigmoid_routing ? 2 : 1));
    if (s.yarn_factor > 0) {  // 0.1 * mscale_all_dim (0.707)
      w->SetMetadata(a + ".rope.scaling.yarn_log_multiplier", GgufValue::F32(0.0707f));
    }
  }
  if (s.sigmoid_routing) {  // DeepSeek-V3's routing keys, as the converters write them
    w->SetMetadata(a + ".expert_gating_func", GgufValue::U32(2));
    w->SetMetadata(a + ".expert_weights_norm", GgufValue::Bool(true));
    if (s.routed_scale > 0)
      w->SetMetadata(a + ".expert_weights_scale", GgufValue::F32(s.routed_scale));
    if (s.n_group > 0) {
      w->SetMetadata(a + ".expert_group_count", GgufValue::U32(static_cast<uint32_t>(s.n_group)));
      w->SetMetadata(a + ".expert_group_used_count",
                     GgufValue::U32(static_cast<uint32_t>(s.n_group_used)));
    }
  }
  if (s.rope_dims > 0 && !mla) {
    w->SetMetadata(a + ".rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(s.rope_dims)));
  }
  if (blocks.shared_expert && !blocks.shared_gated && !mla) {  // GLM-4.5: in expert widths
    w->SetMetadata(a + ".expert_shared_count",
                   GgufValue::U32(static_cast<uint32_t>(s.n_ff_shared / s.n_ff)));
  }
  if (!spec.expert_ff_key.empty()) {
    w->SetMetadata(MetadataKey(spec, spec.expert_ff_key),
                   GgufValue::U32(static_cast<uint32_t>(s.n_ff)));
  }
  if (s.head_dim > 0 && !mla) {
    w->SetMetadata(a + ".attention.key_length", GgufValue::U32(static_cast<uint32_t>(s.head_dim)));
    w->SetMetadata(a + ".attention.value_length",
                   GgufValue::U32(static_cast<uint32_t>(s.head_dim)));
  }
  if (blocks.window_layers != WindowLayers::kNone) {
    w->SetMetadata(a + ".attention.sliding_window",
                   GgufValue::U32(static_cast<uint32_t>(s.sliding_window)));
  }
  if (s.yarn_factor > 0) {
    w->SetMetadata(a + ".rope.scaling.type", GgufValue::String("yarn"));
    w->SetMetadata(a + ".rope.scaling.factor", GgufValue::F32(s.yarn_factor));
    w->SetMetadata(a + ".rope.scaling.original_context_length",
                   GgufValue::U32(static_cast<uint32_t>(s.yarn_original_context)));
  }
  if (blocks.shared_expert && !mla) {
    w->SetMetadata(a + ".expert_shared_feed_forward_length",
                   GgufValue::U32(static_cast<uint32_t>(s.n_ff_shared)));
  }
  if (blocks.delta_net) {  // the keys llama.cpp's converter writes for Qwen3-Next / Qwen3.5
    auto u32 = [](int v) { return GgufValue::U32(static_cast<uint32_t>(v)); };
    w->SetMetadata(a + ".ssm.conv_kernel", u32(s.ssm_conv_kernel));
    w->SetMetadata(a + ".ssm.state_size", u32(s.ssm_head));
    w->SetMetadata(a + ".ssm.group_count", u32(s.ssm_k_heads));
    w->SetMetadata(a + ".ssm.time_step_rank", u32(s.ssm_v_heads));
    w->SetMetadata(a + ".ssm.inner_size", u32(s.ssm_head * s.ssm_v_heads));
    w->SetMetadata(a + ".full_attention_interval", u32(s.full_attention_interval));
    if (blocks.delta_net_heads == DeltaNetHeadOrder::kTiled) {  // Qwen3.5's M-RoPE sections
      w->SetMetadata(a + ".rope.dimension_sections", GgufValue::I32Array({11, 11, 10, 0}));
    }
  }
  w->SetMetadata(a + ".attention.head_count", GgufValue::U32(static_cast<uint32_t>(s.n_head)));
  w->SetMetadata(a + ".attention.head_count_kv",
                 GgufValue::U32(static_cast<uint32_t>(mla ? 1 : s.n_head_kv)));
  w->SetMetadata(a + ".attention.layer_norm_rms_epsilon", GgufValue::F32(s.rms_eps));
  w->SetMetadata(a + ".rope.freq_base", GgufValue::F32(s.rope_theta));
  w->SetMetadata(a + ".expert_count", GgufValue::U32(static_cast<uint32_t>(s.n_expert)));
  w->SetMetadata(a + ".expert_used_count", GgufValue::U32(static_cast<uint32_t>(s.n_expert_used)));
  w->SetMetadata(a + ".vocab_size", GgufValue::U32(static_cast<uint32_t>(s.n_vocab)));

  // Vocabulary: <unk> <s> </s>, 256 byte tokens, then made-up pieces.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(absl::StrFormat("<0x%02X>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (int i = 0; static_cast<int>(tokens.size()) < s.n_vocab; ++i) {
    tokens.push_back(absl::StrCat("\xE2\x96\x81", "w", i));  // "▁w<i>"
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  w->SetMetadata("tokenizer.ggml.model", GgufValue::String("llama"));
  w->SetMetadata("tokenizer.ggml.tokens", GgufValue::StringArray(tokens));
  w->SetMetadata("tokenizer.ggml.scores", GgufValue::F32Array(scores));
  w->SetMetadata("tokenizer.ggml.token_type", GgufValue::I32Array(types));
  w->SetMetadata("tokenizer.ggml.bos_token_id", GgufValue::U32(1));
  w->SetMetadata("tokenizer.ggml.eos_token_id", GgufValue::U32(2));
  w->SetMetadata("tokenizer.ggml.unknown_token_id", GgufValue::U32(0));
  w->SetMetadata("tokenizer.ggml.add_bos_token", GgufValue::Bool(true));
  w->SetMetadata("tokenizer.ggml.add_eos_token", GgufValue::Bool(false));

  const int64_t d = s.n_embd, hd = s.head_size(), q = hd * s.n_head, kv = hd * s.n_head_kv,
                ff = s.n_ff, ne = s.n_expert, fs = s.n_ff_shared;
  auto weight = [&](const std::string& name, DType type, std::vector<int64_t> shape, float scale) {
    Fill f;
    f.stream = SplitMix(s.seed ^ NameHash(name));
    f.scale = scale;
    return w->AddTensorGenerated(name, type, shape, Rows(type, shape[0], f));
  };
  auto ones = [&](const std::string& name, int64_t n) {
    Fill f;
    f.random = false;
    f.constant = 1.0f;
    return w->AddTensorGenerated(name, DType::kF32, {n}, Rows(DType::kF32, n, f));
  };
  auto lin = [](int64_t fan_in) { return static_cast<float>(std::sqrt(3.0 / fan_in)); };
  ODMOE_RETURN_IF_ERROR(weight("token_embd.weight", s.type, {d, s.n_vocab}, 1.0f));
  if (blocks.ffn_layout == FfnLayout::kDenseBesideExperts) {
    ODMOE_RETURN_IF_ERROR(AddGemma4Keys(s, w));
  }
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    if (blocks.ffn_layout == FfnLayout::kDenseBesideExperts) {  // synth_gemma4.cpp
      ODMOE_RETURN_IF_ERROR(AddGemma4Layer(s, l, weight, ones));
      continue;
    }
    ODMOE_RETURN_IF_ERROR(ones(b + "attn_norm.weight", d));
    if (mla) {
      const int64_t h = s.n_head, r = s.kv_lora_rank, qk = s.qk_nope + s.qk_rope, vh = s.v_head;
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_q.weight", s.type, {d, h * qk}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_kv_a_mqa.weight", s.type, {d, r + s.qk_rope}, lin(d)));
      ODMOE_RETURN_IF_ERROR(ones(b + "attn_kv_a_norm.weight", r));
      ODMOE_RETURN_IF_ERROR(
          weight(b + "attn_k_b.weight", s.type, {s.qk_nope, r, h}, lin(s.qk_nope)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_v_b.weight", s.type, {r, vh, h}, lin(r)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_output.weight", s.type, {h * vh, d}, lin(h * vh)));
    } else if (blocks.delta_net && (l + 1) % s.full_attention_interval != 0) {
      ODMOE_RETURN_IF_ERROR(AddDeltaNetTensors(s, spec, l, weight));
    } else {
      ODMOE_RETURN_IF_ERROR(
          weight(b + "attn_q.weight", s.type, {d, blocks.attn_output_gate ? 2 * q : q}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_k.weight", s.type, {d, kv}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_v.weight", s.type, {d, kv}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_output.weight", s.type, {q, d}, lin(q)));
    }
    const bool recurrent = blocks.delta_net && (l + 1) % s.full_attention_interval != 0;
    // q/k norms: not in recurrent layers; an optional one (GLM-4.5) left out.
    if (blocks.qk_norm != QkNorm::kNone && !spec.qk_norm_optional && !recurrent) {
      const bool per_head = blocks.qk_norm == QkNorm::kPerHead;
      ODMOE_RETURN_IF_ERROR(ones(b + "attn_q_norm.weight", per_head ? hd : q));
      ODMOE_RETURN_IF_ERROR(ones(b + "attn_k_norm.weight", per_head ? hd : kv));
    }
    if (spec.attn_biases != AttnBiases::kNone) {
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_q.bias", DType::kF32, {q}, 0.1f));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_k.bias", DType::kF32, {kv}, 0.1f));
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_v.bias", DType::kF32, {kv}, 0.1f));
    }
    if (spec.attn_biases == AttnBiases::kQkvo) {
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_output.bias", DType::kF32, {d}, 0.1f));
    }
    // The attention of a dense layer is as any other's (q/k norms and biases above).
    if (!s.has_experts(l)) {  // a dense layer: its FFN, no router, no experts
      const int64_t fd = s.n_ff_dense;
      ODMOE_RETURN_IF_ERROR(ones(TensorName(spec, TensorRole::kFfnNorm, l), d));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate.weight", s.type, {d, fd}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_down.weight", s.type, {fd, d}, lin(fd)));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_up.weight", s.type, {d, fd}, lin(d)));
      continue;
    }
    if (blocks.shared_expert && blocks.shared_gated) {
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_inp_shexp.weight", DType::kF32, {d}, lin(d)));
    }
    if (blocks.shared_expert) {
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_shexp.weight", s.type, {d, fs}, lin(d)));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_down_shexp.weight", s.type, {fs, d}, lin(fs)));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_up_shexp.weight", s.type, {d, fs}, lin(d)));
    }
    if (blocks.attn_sinks) {
      ODMOE_RETURN_IF_ERROR(weight(b + "attn_sinks.weight", DType::kF32, {s.n_head}, 1.0f));
    }
    if (blocks.router_bias) {
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_inp.bias", DType::kF32, {ne}, 0.1f));
    }
    if (blocks.expert_bias) {
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_exps.bias", DType::kF32, {ff, ne}, 0.1f));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_up_exps.bias", DType::kF32, {ff, ne}, 0.1f));
      ODMOE_RETURN_IF_ERROR(weight(b + "ffn_down_exps.bias", DType::kF32, {d, ne}, 0.1f));
    }
    ODMOE_RETURN_IF_ERROR(ones(TensorName(spec, TensorRole::kFfnNorm, l), d));
    ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_inp.weight", DType::kF32, {d, ne}, lin(d)));
    if (s.sigmoid_routing) {
      ODMOE_RETURN_IF_ERROR(weight(b + "exp_probs_b.bias", DType::kF32, {ne}, 0.05f));
    }
    ODMOE_RETURN_IF_ERROR(weight(b + "ffn_gate_exps.weight", s.type, {d, ff, ne}, lin(d)));
    ODMOE_RETURN_IF_ERROR(weight(b + "ffn_down_exps.weight", s.type, {ff, d, ne}, lin(ff)));
    ODMOE_RETURN_IF_ERROR(weight(b + "ffn_up_exps.weight", s.type, {d, ff, ne}, lin(d)));
  }
  ODMOE_RETURN_IF_ERROR(ones("output_norm.weight", d));
  return weight("output.weight", s.type, {d, s.n_vocab}, lin(d));
}

}  // namespace

SynthSpec SynthSpec::Mixtral8x7B() {
  SynthSpec s;
  s.n_layer = 32;
  s.n_embd = 4096;
  s.n_ff = 14336;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_head = 32;
  s.n_head_kv = 8;
  s.n_vocab = 32000;
  s.n_ctx = 32768;
  s.rope_theta = 1e6f;
  s.rms_eps = 1e-5f;
  s.name = "synthetic-mixtral-8x7b";
  return s;
}

SynthSpec SynthSpec::Qwen3_30B_A3B() {
  SynthSpec s;
  s.arch = "qwen3moe";
  s.n_layer = 48;
  s.n_embd = 2048;
  s.n_ff = 768;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_vocab = 151936;
  s.n_ctx = 40960;
  s.rope_theta = 1e6f;
  s.rms_eps = 1e-6f;
  s.name = "synthetic-qwen3-30b-a3b";
  return s;
}

SynthSpec SynthSpec::Olmoe1B7B() {
  SynthSpec s;
  s.arch = "olmoe";
  s.n_layer = 16;
  s.n_embd = 2048;
  s.n_ff = 1024;
  s.n_expert = 64;
  s.n_expert_used = 8;
  s.n_head = 16;
  s.n_head_kv = 16;
  s.n_vocab = 50304;
  s.n_ctx = 4096;
  s.rope_theta = 1e4f;
  s.rms_eps = 1e-5f;
  s.name = "synthetic-olmoe-1b-7b";
  return s;
}

SynthSpec SynthSpec::Qwen15MoeA27B() {
  SynthSpec s;
  s.arch = "qwen2moe";
  s.n_layer = 24;
  s.n_embd = 2048;
  s.n_ff = 1408;
  s.n_ff_shared = 5632;
  s.n_expert = 60;
  s.n_expert_used = 4;
  s.n_head = 16;
  s.n_head_kv = 16;
  s.n_vocab = 151936;
  s.n_ctx = 8192;
  s.rope_theta = 1e6f;
  s.rms_eps = 1e-6f;
  s.name = "synthetic-qwen1.5-moe-a2.7b";
  return s;
}

SynthSpec SynthSpec::GptOss20B() {
  SynthSpec s;
  s.arch = "gpt-oss";
  s.n_layer = 24;
  s.n_embd = 2880;
  s.n_ff = 2880;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.head_dim = 64;
  s.n_vocab = 201088;
  s.n_ctx = 131072;
  s.rope_theta = 150000.0f;
  s.rms_eps = 1e-5f;
  s.sliding_window = 128;
  s.yarn_factor = 32.0f;
  s.yarn_original_context = 4096;
  s.name = "synthetic-gpt-oss-20b";
  return s;
}

SynthSpec SynthSpec::DeepSeekV2Lite() {
  SynthSpec s;
  s.arch = "deepseek2";
  s.n_layer = 27;
  s.n_embd = 2048;
  s.n_ff = 1408;
  s.n_ff_shared = 2 * 1408;
  s.n_dense_leading = 1;
  s.n_ff_dense = 10944;
  s.n_expert = 64;
  s.n_expert_used = 6;
  s.n_head = 16;
  s.n_head_kv = 1;
  s.kv_lora_rank = 512;
  s.qk_nope = 128;
  s.qk_rope = 64;
  s.v_head = 128;
  s.n_vocab = 102400;
  s.n_ctx = 163840;
  s.rope_theta = 10000.0f;
  s.rms_eps = 1e-6f;
  s.yarn_factor = 40.0f;
  s.yarn_original_context = 4096;
  s.name = "synthetic-deepseek-v2-lite";
  return s;
}

SynthSpec SynthSpec::DeepSeekV3Lite() {
  SynthSpec s = DeepSeekV2Lite();
  s.sigmoid_routing = true;
  s.routed_scale = 2.5f;
  s.n_group = 8;
  s.n_group_used = 4;
  s.name = "synthetic-deepseek-v3-lite";
  return s;
}

SynthSpec SynthSpec::Glm45Air() {
  SynthSpec s;
  s.arch = "glm4moe";
  s.n_layer = 46;
  s.n_embd = 4096;
  s.n_ff = 1408;
  s.n_ff_shared = 1408;
  s.n_dense_leading = 1;
  s.n_ff_dense = 10944;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_head = 96;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.rope_dims = 64;
  s.n_vocab = 151552;
  s.n_ctx = 131072;
  s.rope_theta = 1e6f;
  s.rms_eps = 1e-5f;
  s.sigmoid_routing = true;
  s.routed_scale = 1.0f;
  s.n_group = 1;
  s.n_group_used = 1;
  s.name = "synthetic-glm-4.5-air";
  return s;
}

SynthSpec SynthSpec::MiniMaxM2() {
  SynthSpec s;
  s.arch = "minimax-m2";
  s.n_layer = 62;
  s.n_embd = 3072;
  s.n_ff = 1536;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_head = 48;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.rope_dims = 64;
  s.n_vocab = 200064;
  s.n_ctx = 196608;
  s.rope_theta = 5e6f;
  s.rms_eps = 1e-6f;
  s.sigmoid_routing = true;
  s.name = "synthetic-minimax-m2";
  return s;
}

SynthSpec SynthSpec::Qwen35_35B_A3B() {
  SynthSpec s;
  s.arch = "qwen35moe";
  s.n_layer = 40;
  s.n_embd = 2048;
  s.n_ff = 512;
  s.n_ff_shared = 512;
  s.n_expert = 256;
  s.n_expert_used = 8;
  s.n_head = 16;
  s.n_head_kv = 2;
  s.head_dim = 256;
  s.rope_dims = 64;
  s.ssm_conv_kernel = 4;
  s.ssm_k_heads = 16;
  s.ssm_v_heads = 32;
  s.ssm_head = 128;
  s.full_attention_interval = 4;
  s.n_vocab = 248320;
  s.n_ctx = 262144;
  s.rope_theta = 1e7f;
  s.rms_eps = 1e-6f;
  s.name = "synthetic-qwen3.5-35b-a3b";
  return s;
}

SynthSpec SynthSpec::Qwen3Next80B_A3B() {
  SynthSpec s = Qwen35_35B_A3B();
  s.arch = "qwen3next";
  s.n_layer = 48;
  s.n_expert = 512;
  s.n_expert_used = 10;
  s.n_vocab = 151936;
  s.name = "synthetic-qwen3-next-80b-a3b";
  return s;
}

SynthSpec SynthSpec::Llama4Scout() {
  SynthSpec s;
  s.arch = "llama4";
  s.n_layer = 48;
  s.n_embd = 5120;
  s.n_ff = 8192;
  s.n_ff_shared = 8192;
  s.moe_layer_step = 1;
  s.n_ff_dense = 16384;
  s.n_expert = 16;
  s.n_expert_used = 1;
  s.n_head = 40;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.n_vocab = 202048;
  s.n_ctx = 10485760;
  s.rope_theta = 500000.0f;
  s.rms_eps = 1e-5f;
  s.name = "synthetic-llama-4-scout-17b-16e";
  return s;
}

SynthSpec SynthSpec::Llama4Maverick() {
  SynthSpec s = Llama4Scout();
  s.n_expert = 128;
  s.moe_layer_step = 2;
  s.n_ctx = 1048576;
  s.name = "synthetic-llama-4-maverick-17b-128e";
  return s;
}

absl::StatusOr<SynthSpec> SynthSpec::Preset(const std::string& name) {
  if (name == "mixtral-8x7b" || name == "llama") return Mixtral8x7B();
  if (name == "qwen3-30b-a3b" || name == "qwen3moe") return Qwen3_30B_A3B();
  if (name == "olmoe-1b-7b" || name == "olmoe") return Olmoe1B7B();
  if (name == "qwen1.5-moe-a2.7b" || name == "qwen2moe") return Qwen15MoeA27B();
  if (name == "gpt-oss-20b" || name == "gpt-oss") return GptOss20B();
  if (name == "deepseek-v2-lite" || name == "deepseek2") return DeepSeekV2Lite();
  if (name == "deepseek-v3-lite") return DeepSeekV3Lite();
  if (name == "glm-4.5-air" || name == "glm4moe") return Glm45Air();
  if (name == "minimax-m2") return MiniMaxM2();
  if (name == "gemma-4-26b-a4b" || name == "gemma4") return Gemma4_26B_A4B();
  if (name == "qwen3.5-35b-a3b" || name == "qwen35moe") return Qwen35_35B_A3B();
  if (name == "qwen3-next-80b-a3b" || name == "qwen3next") return Qwen3Next80B_A3B();
  if (name == "llama-4-scout" || name == "llama4") return Llama4Scout();
  if (name == "llama-4-maverick") return Llama4Maverick();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name,
      "' is not a preset (mixtral-8x7b, qwen3-30b-a3b, olmoe-1b-7b, qwen1.5-moe-a2.7b, "
      "gpt-oss-20b, deepseek-v2-lite, deepseek-v3-lite, glm-4.5-air, minimax-m2, "
      "gemma-4-26b-a4b, qwen3.5-35b-a3b, qwen3-next-80b-a3b, llama-4-scout, llama-4-maverick) "
      "or an architecture (llama, qwen3moe, olmoe, qwen2moe, gpt-oss, deepseek2, glm4moe, "
      "minimax-m2, gemma4, qwen35moe, qwen3next, llama4)"));
}

absl::Status ValidateSynthSpec(const SynthSpec& s) {
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  const ArchDesc* spec = FindArch(s.arch);
  if (spec == nullptr) return bad("arch", absl::StrCat("'", s.arch, "' is not in the table"));
  const ArchBlocks& blocks = spec->blocks;
  if (blocks.shared_expert && (s.n_ff_shared < 1 || s.n_ff_shared > 1 << 20)) {
    return bad("shared-ff", "this architecture needs a shared expert width 1..1048576");
  }
  if (s.head_dim < 0 || s.head_dim % 2 != 0) return bad("head-dim", "expected an even size");
  if (blocks.window_layers != WindowLayers::kNone && s.sliding_window < 1) {
    return bad("window", "this architecture needs a sliding window of at least 1");
  }
  if (s.n_layer < 1 || s.n_layer > 4096) return bad("layers", "expected 1..4096");
  if (s.n_dense_leading < 0 || s.n_dense_leading >= s.n_layer) {
    return bad("dense-layers", "expected 0..layers-1 (at least one layer has experts)");
  }
  if (s.moe_layer_step < 0 || s.moe_layer_step > s.n_layer) {
    return bad("moe-step", "expected 0..layers (0 or 1: every layer has experts)");
  }
  if (blocks.router_input_scaled && s.n_expert_used != 1) {
    return bad("top-k", "this architecture's router scales one expert's input: top-1 only");
  }
  if ((s.n_dense_leading > 0 || s.moe_layer_step > 1) &&
      (s.n_ff_dense < 1 || s.n_ff_dense > 1 << 20)) {
    return bad("dense-ff", "dense layers need an FFN width 1..1048576");
  }
  if (blocks.attention == AttentionKind::kMla) {
    if (s.kv_lora_rank < 1 || s.qk_nope < 1 || s.qk_rope < 2 || s.qk_rope % 2 != 0 ||
        s.v_head < 1 || s.n_head_kv != 1) {
      return bad("mla",
                 "latent attention needs kv_lora_rank, qk_nope, v_head >= 1, an even "
                 "qk_rope >= 2 and one KV head");
    }
    if (s.n_ff_shared % s.n_ff != 0) {
      return bad("shared-ff", "DeepSeek's shared experts: a multiple of the expert width");
    }
    if (s.type == DType::kQ8_0 && (s.qk_nope % 32 != 0 || s.kv_lora_rank % 32 != 0 ||
                                   s.v_head * s.n_head % 32 != 0 || s.n_ff_dense % 32 != 0)) {
      return bad("type",
                 "q8_0 needs qk_nope, kv_lora_rank, heads x v_head and the dense FFN "
                 "to be multiples of 32");
    }
  }
  if (blocks.delta_net) {
    if (s.ssm_conv_kernel < 2 || s.ssm_conv_kernel > 8 || s.ssm_k_heads < 1 || s.ssm_head < 1 ||
        s.ssm_v_heads < 1 || s.ssm_v_heads % s.ssm_k_heads != 0 || s.full_attention_interval < 1) {
      return bad("ssm",
                 "Gated DeltaNet needs 2..8 conv taps, key heads >= 1, value heads a multiple "
                 "of them, a head size >= 1 and a full-attention interval >= 1");
    }
  }
  if (s.rope_dims < 0 || s.rope_dims % 2 != 0 || s.rope_dims > s.head_size()) {
    return bad("rope-dims", "expected an even count up to the head size");
  }
  if (s.sigmoid_routing && s.n_group > 1 && s.n_group_used < s.n_group &&
      (s.n_expert % s.n_group != 0 || s.n_expert / s.n_group < 2 || s.n_group > 64 ||
       s.n_group_used < 1 || s.n_group_used * (s.n_expert / s.n_group) < s.n_expert_used)) {
    return bad("groups",
               "expert groups must split the experts evenly (2 or more each, at "
               "most 64 groups) and keep at least top-k of them");
  }
  if (blocks.ffn_layout == FfnLayout::kDenseBesideExperts &&
      (s.head_dim < 2 || s.head_dim_full < 2 || s.head_dim_full % 2 != 0 || s.n_head_kv_full < 1 ||
       s.n_head % s.n_head_kv_full != 0 || s.window_period < 1 || s.n_ff_beside < 1)) {
    return bad("gemma4",
               "needs the sliding and full layers' head sizes (even) and KV heads, a period "
               "of full layers and the dense FFN's width");
  }
  if (s.n_embd < 2 || s.n_embd > 65536) return bad("embd", "expected 2..65536");
  if (s.n_ff < 1 || s.n_ff > 1 << 20) return bad("ff", "expected 1..1048576");
  if (s.n_expert < 2 || s.n_expert > 4096) return bad("experts", "expected 2..4096");
  if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert) {
    return bad("top-k", "expected 1..experts");
  }
  if (s.n_head < 1 || (s.head_dim == 0 && s.n_embd % s.n_head != 0)) {
    return bad("heads", "must divide embd (or give the head size)");
  }
  if (s.head_size() % 2 != 0) return bad("heads", "the head size must be even (RoPE)");
  if (s.n_head_kv < 1 || s.n_head % s.n_head_kv != 0) {
    return bad("kv-heads", "must divide heads");
  }
  if (s.n_vocab < 259 + 1 || s.n_vocab > 1 << 20) {
    return bad("vocab", "expected 260..1048576 (3 control + 256 byte tokens + pieces)");
  }
  if (s.n_ctx < 2 || s.n_ctx > 1 << 24) return bad("ctx", "expected 2..16777216");
  if (s.type != DType::kF16 && s.type != DType::kQ8_0) return bad("type", "expected f16 or q8_0");
  if (s.type == DType::kQ8_0 && (s.n_embd % 32 != 0 || s.n_ff % 32 != 0 ||
                                 s.n_ff_shared % 32 != 0 || s.head_size() * s.n_head % 32 != 0)) {
    return bad("type",
               "q8_0 needs embd, ff, shared ff and heads x head size to be multiples of 32");
  }
  return absl::OkStatus();
}

uint64_t SynthExpertBytes(const SynthSpec& s) {
  return RowBytes(s.type, s.n_embd) * static_cast<uint64_t>(s.n_ff) * 2 +
         RowBytes(s.type, s.n_ff) * static_cast<uint64_t>(s.n_embd);
}

absl::StatusOr<uint64_t> SynthModelBytes(const SynthSpec& spec) {
  GgufWriter w;
  ODMOE_RETURN_IF_ERROR(Build(spec, &w));
  return w.FileSize();
}

absl::Status WriteSynthModel(
    const SynthSpec& spec, const std::string& path,
    const std::function<void(uint64_t written, uint64_t total)>& progress) {
  GgufWriter w;
  ODMOE_RETURN_IF_ERROR(Build(spec, &w));
  return w.WriteFile(path, progress);
}

}  // namespace odmoe
