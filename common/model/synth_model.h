// Synthetic models with the shapes of real ones and seeded random weights,
// for throughput and memory measurements at real sizes (recall needs a
// trained model: the weights here route tokens arbitrarily). The file is a
// normal GGUF of one of the architectures of model_arch.h ("llama" with
// experts, like Mixtral, by default; "qwen3moe", "olmoe", "qwen2moe",
// "gpt-oss", "deepseek2" with their q/k norms, biases, shared experts, sinks,
// windows, latent attention and dense layers) with a synthetic
// SentencePiece-style vocabulary (control tokens, 256 byte tokens,
// then made-up pieces), so every tool and daemon opens it; text is
// meaningless. Tensors are generated while the file is written, so a file
// larger than memory (Mixtral 8x7B is ~93 GB in F16) never is in memory.
//
//   SynthSpec s = SynthSpec::Mixtral8x7B();  s.n_layer = 2;  s.type = DType::kQ8_0;
//   // or: ODMOE_ASSIGN_OR_RETURN(SynthSpec s, SynthSpec::Preset("qwen3-30b-a3b"));
//   ODMOE_RETURN_IF_ERROR(ValidateSynthSpec(s));
//   ODMOE_ASSIGN_OR_RETURN(uint64_t bytes, SynthModelBytes(s));
//   ODMOE_RETURN_IF_ERROR(WriteSynthModel(s, "/data/mixtral-2l-q8_0.gguf"));
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"

namespace odmoe {

struct SynthSpec {
  std::string arch = "llama";  // general.architecture: a description of model_arch.h
  int n_layer = 2;
  int n_embd = 256;
  int n_ff = 512;
  int n_expert = 8;
  int n_expert_used = 2;
  int n_head = 8;
  int n_head_kv = 2;
  int head_dim = 0;     // 0: n_embd / n_head
  int n_ff_shared = 0;  // the shared expert's width (architectures that have one)
  int n_dense_leading = 0;  // layers [0, n) have a dense FFN of n_ff_dense (DeepSeek)
  int n_ff_dense = 0;
  /// > 1: only layers with (l + 1) % moe_layer_step == 0 have experts, the
  /// others a dense FFN of n_ff_dense (llama4's interleave_moe_layer_step).
  int moe_layer_step = 0;
  /// Whether layer `l` has experts.
  bool has_experts(int l) const {
    return l >= n_dense_leading && (moe_layer_step <= 1 || (l + 1) % moe_layer_step == 0);
  }
  // Multi-head latent attention (deepseek2): the latent width and the
  // per-head sizes (n_head_kv is then 1: one latent "head").
  int kv_lora_rank = 0;
  int qk_nope = 0;
  int qk_rope = 0;
  int v_head = 0;
  // Gated DeltaNet (qwen3next, qwen35moe): the recurrent layers' shapes
  // (ssm.*), every full_attention_interval-th layer attention (rope_dims
  // below: the rotated dims per attention head).
  int ssm_conv_kernel = 4;
  int ssm_k_heads = 0;
  int ssm_v_heads = 0;
  int ssm_head = 0;
  int full_attention_interval = 4;
  int sliding_window = 0;         // architectures with sliding-window layers (gpt-oss)
  float yarn_factor = 0;          // > 0: YaRN RoPE scaling with this factor
  int yarn_original_context = 0;  // and this original context
  int rope_dims = 0;              // > 0: RoPE on the first rope_dims of each head (GLM, MiniMax)
  // Sigmoid routing (DeepSeek-V3, GLM-4.5, MiniMax-M2): expert_gating_func 2,
  // a correction bias per layer (exp_probs_b), renormalised weights times
  // routed_scale (> 0), n_group_used of n_group expert groups (> 1: limited).
  bool sigmoid_routing = false;
  float routed_scale = 0;
  int n_group = 0;
  int n_group_used = 0;
  // Gemma 4 (FfnLayout::kDenseBesideExperts): head_dim / n_head_kv are the
  // sliding layers'; every window_period-th layer is full, with these.
  int head_dim_full = 0;
  int n_head_kv_full = 0;
  int window_period = 0;
  int n_ff_beside = 0;            // the dense FFN beside the experts
  float final_logit_softcap = 0;  // > 0: final_logit_softcapping
  int n_vocab = 512;
  int n_ctx = 512;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  DType type = DType::kF16;  // weight matrices: kF16 | kQ8_0 (norms, router: F32)
  uint64_t seed = 1;
  std::string name = "synthetic";

  /// Mixtral-8x7B's shapes: 32 layers, 4096 / 14336, 8 experts, top-2, 32
  /// heads, 8 KV heads, vocabulary 32000, RoPE theta 1e6.
  static SynthSpec Mixtral8x7B();
  /// Qwen3-30B-A3B: 48 layers, 2048, experts of 768, 128 experts top-8, 32
  /// heads of 128, 4 KV heads, vocabulary 151936.
  static SynthSpec Qwen3_30B_A3B();
  /// OLMoE-1B-7B: 16 layers, 2048, experts of 1024, 64 experts top-8, 16
  /// heads, vocabulary 50304.
  static SynthSpec Olmoe1B7B();
  /// Qwen1.5-MoE-A2.7B: 24 layers, 2048, experts of 1408, 60 experts top-4,
  /// 16 heads, a shared expert of 5632, vocabulary 151936.
  static SynthSpec Qwen15MoeA27B();
  /// gpt-oss-20b: 24 layers, 2880, experts of 2880, 32 experts top-4, 64
  /// heads of 64, 8 KV heads, sliding window 128 on even layers, YaRN x32,
  /// vocabulary 201088 (real files store the experts in MXFP4).
  static SynthSpec GptOss20B();
  /// DeepSeek-V2-Lite: 27 layers (the first dense, FFN 10944), 2048, experts
  /// of 1408, 64 experts top-6, 2 shared experts (2816), 16 heads of latent
  /// attention (kv_lora_rank 512, qk 128 + 64, v 128), YaRN x40, vocabulary
  /// 102400.
  static SynthSpec DeepSeekV2Lite();
  /// DeepSeek-V2-Lite's shapes with DeepSeek-V3's routing: sigmoid scores,
  /// a correction bias, 8 groups of 8 experts of which 4 are searched,
  /// renormalised, times 2.5 (a deepseek2 file, as V3 / R1 / Kimi-K2 files are).
  static SynthSpec DeepSeekV3Lite();
  /// GLM-4.5-Air: 46 layers (the first dense, FFN 10944), 4096, experts of
  /// 1408, 128 experts top-8, a shared expert, 96 heads of 128 / 8 KV with
  /// q/k/v biases, RoPE on 64 of 128, sigmoid routing with the correction
  /// bias, vocabulary 151552 (no MTP layer).
  static SynthSpec Glm45Air();
  /// MiniMax-M2: 62 layers, 3072, experts of 1536, 256 experts top-8, 48
  /// heads of 128 / 8 KV, full-row q/k norms, RoPE on 64 of 128, sigmoid
  /// routing with the correction bias, vocabulary 200064.
  static SynthSpec MiniMaxM2();
  /// gemma-4-26B-A4B: 30 layers, 2816, experts of 704 and a dense FFN of
  /// 2112 in every layer, 128 experts top-8, 16 heads; sliding layers
  /// (window 1024) of head 256 with 8 KV heads, every sixth layer full with
  /// head 512 and 2 KV heads (V = K); vocabulary 262144.
  static SynthSpec Gemma4_26B_A4B();
  /// Qwen3.5-35B-A3B: 40 layers (Gated DeltaNet, every 4th gated attention),
  /// 2048, 256 experts of 512 top-8, a shared expert of 512, 16 heads of 256
  /// (2 KV heads, 64 rotated dims), linear attention 16 key / 32 value heads
  /// of 128, vocabulary 248320.
  static SynthSpec Qwen35_35B_A3B();
  /// Qwen3-Next-80B-A3B: 48 layers as above, 512 experts of 512 top-10, a
  /// shared expert of 512, vocabulary 151936.
  static SynthSpec Qwen3Next80B_A3B();
  /// Llama-4-Scout-17B-16E: 48 layers, 5120, experts of 8192, 16 experts
  /// top-1, a shared expert of 8192 in every layer, 40 heads of 128, 8 KV
  /// heads, vocabulary 202048, RoPE theta 5e5 (without the file's llama3
  /// RoPE factors, which odmoe does not apply yet).
  static SynthSpec Llama4Scout();
  /// Llama-4-Maverick-17B-128E: Scout's widths with 128 experts in every
  /// second layer and a dense FFN of 16384 in the others.
  static SynthSpec Llama4Maverick();
  /// By name: "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b",
  /// "qwen1.5-moe-a2.7b", "gpt-oss-20b", "deepseek-v2-lite",
  /// "deepseek-v3-lite", "glm-4.5-air", "minimax-m2", "gemma-4-26b-a4b",
  /// "qwen3.5-35b-a3b", "qwen3-next-80b-a3b", "llama-4-scout",
  /// "llama-4-maverick", or an architecture name for its preset ("llama",
  /// "qwen3moe", "olmoe", "qwen2moe", "gpt-oss", "deepseek2", "glm4moe",
  /// "minimax-m2", "gemma4", "qwen35moe", "qwen3next", "llama4").
  /// INVALID_ARGUMENT listing the names.
  static absl::StatusOr<SynthSpec> Preset(const std::string& name);
  int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

/// INVALID_ARGUMENT naming the field when the shapes cannot make a model.
absl::Status ValidateSynthSpec(const SynthSpec& spec);

/// The file's size in bytes, and one expert's bytes (gate + up + down).
absl::StatusOr<uint64_t> SynthModelBytes(const SynthSpec& spec);
uint64_t SynthExpertBytes(const SynthSpec& spec);

/// Writes the model (to a temporary name, renamed into place when complete).
/// `progress` (optional) hears bytes written and the total as it goes.
absl::Status WriteSynthModel(
    const SynthSpec& spec, const std::string& path,
    const std::function<void(uint64_t written, uint64_t total)>& progress = {});

}  // namespace odmoe
