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
  ExpertWeights shared_expert;              // n_ff_shared > 0: gate, up, down
  WeightRef shared_gate;                    // rows 1, cols n_embd (shared_gated only)
  ExpertWeights dense_ffn;                  // a layer without experts: its FFN
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
  const DenseLayerWeights& layer(int l) const { return layers_[static_cast<size_t>(l)]; }

 private:
  DenseWeights() = default;
  absl::StatusOr<WeightRef> Load(Backend& backend, const TensorView& view);
  absl::StatusOr<const float*> LoadFloats(Backend& backend, const TensorView& view);
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
  std::vector<DenseLayerWeights> layers_;
  std::vector<std::unique_ptr<BackendBuffer>> storage_;  // device copies, if any
  uint64_t copied_bytes_ = 0;                            // bytes of those copies
};

}  // namespace odmoe
