// Every weight of a model except the experts, made usable by one backend:
// what the main node needs (embeddings, attention, norms, router, LM head).
// On a host backend these are zero-copy views of the mapped file; onto a
// device the copy shows its progress (util/step_progress.h) when it is long.
//
//   ODMOE_ASSIGN_OR_RETURN(auto w, DenseWeights::Load(*model, *backend));
//   backend->MatMul(w->layer(0).attn_q, x, q);
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "model/expert_pack.h"
#include "model/model_file.h"

namespace odmoe {

struct DenseLayerWeights {
  const float* attn_norm = nullptr;  // n_embd floats in backend memory
  const float* ffn_norm = nullptr;
  WeightRef attn_q, attn_k, attn_v, attn_output;
  WeightRef router;  // rows n_expert, cols n_embd
  // Optional parts (nullptr / empty when the model has none; ModelConfig says).
  const float* attn_q_norm = nullptr;  // head_dim or q_width floats (QkNorm)
  const float* attn_k_norm = nullptr;
  const float* attn_q_bias = nullptr;  // q_width floats (attn_bias)
  const float* attn_k_bias = nullptr;  // kv_width floats
  const float* attn_v_bias = nullptr;
  const float* attn_output_bias = nullptr;  // n_embd floats, or nullptr
  const float* attn_sinks = nullptr;        // n_head floats (attn_sinks)
  const float* router_bias = nullptr;       // n_expert floats (router_bias)
  const float* selection_bias = nullptr;    // n_expert floats (router_selection_bias)
  ExpertWeights shared_expert;              // n_ff_shared > 0: gate, up, down
  WeightRef shared_gate;                    // rows 1, cols n_embd (shared_gated only)
  ExpertWeights dense_ffn;                  // a layer without experts: its FFN
  // Gemma 4's blocks (null / empty where the architecture has none):
  const float* attn_post_norm = nullptr;  // post_norms: n_embd floats
  const float* ffn_post_norm = nullptr;
  // FfnLayout::kDenseBesideExperts: dense_ffn (above) runs beside the experts.
  const float* ffn_post_norm_1 = nullptr;
  const float* ffn_pre_norm_2 = nullptr;
  const float* ffn_post_norm_2 = nullptr;
  /// RouterInput::kScaledRms: ffn_gate_inp.scale / sqrt(n_embd), the weight
  /// of the router's RMS norm (n_embd floats).
  const float* router_input_norm = nullptr;
  /// expert_weight_scale: one factor per expert, in host memory (applied to
  /// the routing weights the host holds).
  std::vector<float> expert_scale;
  const float* layer_output_scale = nullptr;  // one float, or null
  // Multi-head latent attention (AttentionKind::kMla): attn_q (or q_a, its
  // norm and q_b with q_lora_rank), the latent projection and its norm, and
  // per head the absorbed k_b (rows kv_lora_rank, cols qk_nope) and v_b
  // (rows v_head, cols kv_lora_rank).
  WeightRef attn_q_a, attn_q_b;
  const float* attn_q_a_norm = nullptr;
  WeightRef attn_kv_a;  // rows kv_lora_rank + qk_rope, cols n_embd
  const float* attn_kv_a_norm = nullptr;
  std::vector<WeightRef> attn_k_b, attn_v_b;
  // The same per-head weights as tables (a one-row step's heads in one
  // MatMulById each).
  WeightTable attn_k_b_table, attn_v_b_table;
  // Gated DeltaNet (a recurrent layer: ModelConfig::is_recurrent): the in
  // projections (ssm_ba, or ssm_beta and ssm_alpha), the out projection, and
  // F32 vectors: conv taps [conv_dim][conv_kernel], dt_bias, a (-exp(A_log)),
  // the gated norm's weight.
  WeightRef attn_qkv, attn_gate, ssm_ba, ssm_beta, ssm_alpha, ssm_out;
  const float* ssm_conv1d = nullptr;
  const float* ssm_dt_bias = nullptr;
  const float* ssm_a = nullptr;
  const float* ssm_norm = nullptr;
  // Mamba-2 (a kMamba2 layer of ModelConfig::layer_blocks; also ssm_conv1d,
  // ssm_dt_bias, ssm_a, ssm_norm [inner] and ssm_out above): the in
  // projection [z | x | B | C | dt], F32 conv biases and D per head.
  WeightRef ssm_in;
  const float* ssm_conv1d_bias = nullptr;
  const float* ssm_d = nullptr;
};

class DenseWeights {
 public:
  static absl::StatusOr<std::unique_ptr<DenseWeights>> Load(const ModelFile& model,
                                                            Backend& backend);

  const WeightRef& token_embd() const { return token_embd_; }
  const WeightRef& output() const { return output_; }
  const float* output_norm() const { return output_norm_; }
  /// sqrt(n_embd), one float in backend memory (ArchBlocks::embd_scaled).
  const float* embd_scale() const { return embd_scale_; }
  /// head_dim ones in backend memory: the weight of a norm without one (v_norm).
  const float* ones() const { return ones_; }
  const DenseLayerWeights& layer(int l) const { return layers_[static_cast<size_t>(l)]; }

 private:
  DenseWeights() = default;
  absl::StatusOr<WeightRef> Load(Backend& backend, const TensorView& view);
  absl::StatusOr<const float*> LoadFloats(Backend& backend, const TensorView& view);
  /// Host floats copied into a buffer of the backend's, kept with the weights.
  absl::StatusOr<const float*> UploadFloats(Backend& backend, const std::vector<float>& values);
  /// Gemma 4's norms and scales of layer `l` (dense_weights_gemma.cpp).
  absl::Status LoadGemmaLayer(const ModelFile& model, Backend& backend, int l,
                              DenseLayerWeights* d);
  /// Layer `l`'s attention weights (q/k/v/output or MLA's), into `d`.
  absl::Status LoadAttention(const ModelFile& model, Backend& backend, int l, DenseLayerWeights* d);
  /// A recurrent layer's Gated DeltaNet weights, into `d`.
  absl::Status LoadDeltaNet(const ModelFile& model, Backend& backend, int l, DenseLayerWeights* d);
  /// A Mamba-2 layer's weights, into `d`.
  absl::Status LoadMamba2(const ModelFile& model, Backend& backend, int l, DenseLayerWeights* d);
  /// Layer `l`'s router, biases and shared expert, or its dense FFN.
  absl::Status LoadFfn(const ModelFile& model, Backend& backend, int l, DenseLayerWeights* d);

  WeightRef token_embd_, output_;
  const float* output_norm_ = nullptr;
  const float* embd_scale_ = nullptr;
  const float* ones_ = nullptr;
  std::vector<DenseLayerWeights> layers_;
  std::vector<std::unique_ptr<BackendBuffer>> storage_;  // device copies, if any
  uint64_t copied_bytes_ = 0;                            // bytes of those copies
};

}  // namespace odmoe
