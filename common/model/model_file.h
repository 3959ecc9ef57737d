// A Mixture-of-Experts model file: the GGUF mapping, its validated
// configuration, and zero-copy views of every tensor by role.
//
// Open() finds the architecture's description (model_arch.h), reads every
// hyperparameter (required ones must be present and in range: the keys every
// architecture shares, then the description's), and checks every tensor the
// description's blocks need for presence, type and shape against the
// configuration, so code that uses a ModelFile never meets a tensor of the
// wrong size.
//
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<ModelFile> m, ModelFile::Open(path));
//   const ModelConfig& c = m->config();
//   const LayerTensors& l0 = m->layer(0);
//   ExpertTensors e5 = m->Expert(/*layer=*/0, /*expert=*/5);  // 2-D views
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gguf/gguf_reader.h"
#include "model/model_arch.h"
#include "model/model_config.h"
#include "tensor/tensor_view.h"

namespace odmoe {

/// The three matrices of one expert, each a 2-D view ({in, out}), and its
/// biases where the architecture has them (ModelConfig::expert_bias; else
/// data == nullptr).
struct ExpertTensors {
  TensorView gate;                // {n_embd, n_ff}
  TensorView up;                  // {n_embd, n_ff}
  TensorView down;                // {n_ff, n_embd}
  TensorView gate_bias, up_bias;  // F32 {n_ff}
  TensorView down_bias;           // F32 {n_embd}
};

/// The tensors of one transformer block.
struct LayerTensors {
  TensorView attn_norm;    // {n_embd}
  TensorView attn_q;       // {n_embd, n_head * head_dim}
  TensorView attn_k;       // {n_embd, n_head_kv * head_dim}
  TensorView attn_v;       // {n_embd, n_head_kv * head_dim}
  TensorView attn_output;  // {n_head * head_dim, n_embd}
  TensorView ffn_norm;     // {n_embd}
  TensorView router;       // {n_embd, n_expert}
  // Optional parts (data == nullptr when the architecture or file has none;
  // ModelConfig says which are present).
  TensorView attn_q_norm, attn_k_norm;  // QkNorm::kPerHead {head_dim}; kFull {width}
  TensorView attn_q_bias, attn_k_bias, attn_v_bias, attn_output_bias;  // attn_bias
  TensorView shexp_gate_inp;                                           // {n_embd}
  TensorView shexp_gate, shexp_up, shexp_down;  // {n_embd, n_ff_shared} x2, {n_ff_shared, n_embd}
  TensorView attn_sinks;                        // attn_sinks: F32 {n_head}
  TensorView router_bias;                       // router_bias: F32 {n_expert}
  TensorView exp_probs_b;                       // router_selection_bias: F32 {n_expert}
  // expert_bias: F32 {n_ff, n_expert} x2, {n_embd, n_expert} (a row per expert).
  TensorView gate_exps_bias, up_exps_bias, down_exps_bias;
  // kStacked: 3-D {in, out, n_expert}; kPerExpert: empty (see per_expert).
  // A dense layer (ModelConfig::has_experts false) has no router and no experts.
  TensorView gate_exps, up_exps, down_exps;
  TensorView gate_up_exps;  // kStackedGateUp: {n_embd, 2 n_ff, n_expert} (gate_exps, up_exps empty)
  std::vector<ExpertTensors> per_expert;  // kPerExpert only
  // A dense layer's FFN: {n_embd, n_ff_dense} x2, {n_ff_dense, n_embd}.
  TensorView ffn_gate, ffn_up, ffn_down;
  // Multi-head latent attention (AttentionKind::kMla; attn_k / attn_v are
  // empty, attn_q is {n_embd, n_head * qk_head} or, with q_lora_rank, empty
  // and q comes from attn_q_b(norm(attn_q_a h))); attn_output is
  // {n_head * v_head, n_embd}.
  TensorView attn_kv_a_mqa;   // {n_embd, kv_lora_rank + qk_rope}
  TensorView attn_kv_a_norm;  // F32 {kv_lora_rank}
  TensorView attn_k_b;        // {qk_nope, kv_lora_rank, n_head}
  TensorView attn_v_b;        // {kv_lora_rank, v_head, n_head}
  TensorView attn_q_a;        // {n_embd, q_lora_rank}
  TensorView attn_q_a_norm;   // F32 {q_lora_rank}
  TensorView attn_q_b;        // {q_lora_rank, n_head * qk_head}
  // Gemma 4 (model_window_layers.cpp): the sandwich norms (post_norms), the
  // dense FFN beside the experts (ffn_gate / ffn_up / ffn_down above, with
  // n_ff_beside) and its norms, the router's input scale, the per-expert
  // weight scale, the layer's output scale; all F32.
  TensorView attn_post_norm, ffn_post_norm;                     // {n_embd}
  TensorView ffn_post_norm_1, ffn_pre_norm_2, ffn_post_norm_2;  // {n_embd}
  TensorView router_scale;                                      // {n_embd}
  TensorView expert_scale;                                      // {n_expert}
  TensorView layer_output_scale;                                // {1}; may be absent
  // Gated DeltaNet (ModelConfig::is_recurrent(l); attn_q/k/v/output are then
  // empty). Shapes in DeltaNetShape's terms (model_delta_net.cpp).
  TensorView attn_qkv;     // {n_embd, conv_dim}
  TensorView attn_gate;    // {n_embd, value_dim}: z
  TensorView ssm_ba;       // {n_embd, 2 * n_v_heads} (delta_net_ba_fused)
  TensorView ssm_beta;     // {n_embd, n_v_heads} (otherwise)
  TensorView ssm_alpha;    // {n_embd, n_v_heads}
  TensorView ssm_conv1d;   // F32 {conv_kernel, conv_dim}
  TensorView ssm_dt_bias;  // F32 {n_v_heads}
  TensorView ssm_a;        // F32 {n_v_heads}: -exp(A_log)
  TensorView ssm_norm;     // F32 {head_v}
  TensorView ssm_out;      // {value_dim, n_embd}
  // Mamba-2 (a kMamba2 layer of ArchBlocks::mamba2; also ssm_conv1d,
  // ssm_dt_bias, ssm_a, ssm_norm {inner} and ssm_out above).
  TensorView ssm_in;           // {n_embd, in_proj}
  TensorView ssm_conv1d_bias;  // F32 {conv_dim}
  TensorView ssm_d;            // F32 {n_heads}
};

class ModelFile {
 public:
  /// Opens and validates `path`. NOT_FOUND / INVALID_ARGUMENT naming the file
  /// and the offending key or tensor.
  static absl::StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path);

  const std::string& path() const { return gguf_->path(); }
  const GgufFile& gguf() const { return *gguf_; }
  const ArchDesc& arch() const { return *arch_; }
  const ModelConfig& config() const { return config_; }

  const TensorView& token_embd() const { return token_embd_; }
  const TensorView& output_norm() const { return output_norm_; }
  /// The LM head (token_embd when the file ties them).
  const TensorView& output() const { return output_; }
  const LayerTensors& layer(int l) const { return layers_[static_cast<size_t>(l)]; }

  /// Views of one expert's matrices (zero-copy; layer and expert must be in
  /// range — callers validate ids that come from outside first).
  ExpertTensors Expert(int layer, int expert) const;

  /// A 64-bit identity of the model: a hash of the file's metadata and tensor
  /// table (not the weights), plus its size. Two nodes agree on a model iff
  /// their fingerprints match.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  ModelFile() = default;
  absl::Status ReadConfig();
  absl::Status BindTensors();
  /// q/k norms, attention biases and the shared expert of layer `l`, as the
  /// architecture and the file have them.
  absl::Status BindOptionalLayerTensors(int l, LayerTensors* t);
  absl::Status BindSelectionBias(int l, LayerTensors* t);
  /// Multi-head latent attention's shapes (model_mla.cpp).
  absl::Status ReadMlaConfig();
  /// Llama 4's layer pattern, temperature and router (model_llama4.cpp).
  absl::Status ReadLlama4Config();
  /// Layer `l`'s attention tensors: q/k/v/output, or MLA's (model_mla.cpp).
  absl::Status BindAttentionTensors(int l, LayerTensors* t);
  absl::Status BindMlaTensors(int l, LayerTensors* t);
  /// Gated DeltaNet's shapes and which layers are recurrent
  /// (model_delta_net.cpp).
  absl::Status ReadDeltaNetConfig();
  absl::Status BindDeltaNetTensors(int l, LayerTensors* t);
  /// Mamba-2's shapes and each layer's block (model_mamba2.cpp); the per
  /// layer head_count_kv, read before the shared keys.
  absl::Status ReadMamba2Config();
  absl::StatusOr<int> Mamba2HeadCountKv();
  absl::Status BindMamba2Tensors(int l, LayerTensors* t);
  /// Layer `l`'s router and experts, or its dense FFN.
  absl::Status BindFfnTensors(int l, LayerTensors* t);
  /// The sliding-layer pattern, the per-layer attention shapes and what
  /// Gemma 4's files say beyond them (model_window_layers.cpp).
  absl::Status ReadWindowLayerShapes();
  /// Layer `l`'s sandwich norms, dense FFN beside the experts, router and
  /// expert scales, output scale, as the blocks have them.
  absl::Status BindGemmaLayerTensors(int l, LayerTensors* t);
  /// Every expert of a layer stored alike; fills ModelConfig::expert_storage.
  absl::Status CheckExpertStorage();

  std::unique_ptr<GgufFile> gguf_;
  const ArchDesc* arch_ = nullptr;
  ModelConfig config_;
  TensorView token_embd_, output_norm_, output_;
  std::vector<LayerTensors> layers_;
  uint64_t fingerprint_ = 0;
};

}  // namespace odmoe
