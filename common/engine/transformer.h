// The Mixture-of-Experts transformer, layer by layer, on one backend.
//
// Forward() runs a batch of tokens through every layer and asks an
// ExpertExecutor for the experts of each MoE block, so the same code serves
// the single-process engine (local experts), the shadow node (local
// quantized experts) and the cluster's main node (remote experts). The steps
// are public too, for callers that interleave their own work between them:
//
//   BeginBatch(tokens, pos0)               embeddings -> x
//   for each layer l:
//     AttentionBlock(l)                    (MLA: see transformer_mla.cpp)                    x += Wo * attn(rope(qn(Wq h + bq)), rope(kn(Wk h + bk)),
//                                          Wv h + bv), h = rmsnorm(x) * attn_norm; K/V rows
//                                          cached; biases, q/k norms, sinks, a
//                                          sliding window (ModelConfig::window_of)
//                                          and YaRN where the architecture has them
//                                          (model_arch.h)
//     RouteBlock(l)                        h = rmsnorm(x) * ffn_norm; top-k of router(h)
//                                          (+ router bias) with the architecture's gating
//     ... experts(h) -> moe_output() ...   (ExpertExecutor::Run)
//     FinishMoe(l)                         moe_output += sigmoid(h . g) * shared(h) where the
//                                          model has a shared expert (ungated: + shared(h));
//                                          x += moe_output
//     or DenseFfnBlock(l)                  a layer without experts: x += ffn(rmsnorm(x))
//   Logits(&logits)                        LM head on the last row
//   RowLogits(first, &logits)              LM head on rows [first, n) (scoring)
//
//   ODMOE_ASSIGN_OR_RETURN(auto tf, Transformer::Create(*model, *backend, {}));
//   std::vector<float> logits;
//   ODMOE_RETURN_IF_ERROR(tf->Forward(prompt_ids, 0, *experts, &logits, nullptr));
//
// Batches larger than n_batch are split; thanks to the backend's determinism
// contract the result does not depend on the split.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "engine/dense_weights.h"
#include "engine/expert_executor.h"
#include "engine/expert_ffn.h"
#include "engine/kv_cache.h"
#include "model/model_file.h"

namespace odmoe {

/// Expert ids chosen at every layer for one token: [n_layer * k], each
/// layer's k ids in descending routing weight.
using TokenRouting = std::vector<int32_t>;

class Transformer {
 public:
  struct Options {
    int n_ctx = 0;     // KV capacity; 0 = min(training context, 4096)
    int n_batch = 64;  // rows per forward chunk
  };

  static absl::StatusOr<std::unique_ptr<Transformer>> Create(const ModelFile& model,
                                                             Backend& backend, Options options);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  int n_ctx() const { return kv_.capacity(); }
  int n_batch() const { return n_batch_; }
  KvCache& kv_cache() { return kv_; }

  /// Runs `tokens` at positions [pos0, pos0 + n). If `logits` is non-null it
  /// receives the n_vocab logits of the last token; if `routing` is non-null
  /// one TokenRouting per token is appended. OUT_OF_RANGE when the positions
  /// pass n_ctx; INVALID_ARGUMENT for a token id outside the vocabulary.
  absl::Status Forward(std::span<const int32_t> tokens, int pos0, ExpertExecutor& experts,
                       std::vector<float>* logits, std::vector<TokenRouting>* routing);

  /// Called after each batch of a ForwardBatches with the index (in
  /// `tokens`) of the batch's first row; the batch's rows are then in x and
  /// RowLogits() computes their logits. An error ends the forward.
  using BatchDone = std::function<absl::Status(int64_t first_row)>;
  /// Forward without the final logits, calling `after_batch` after every
  /// batch of at most n_batch rows. Forward() is this plus Logits(): both run
  /// exactly the same layer code.
  absl::Status ForwardBatches(std::span<const int32_t> tokens, int pos0, ExpertExecutor& experts,
                              std::vector<TokenRouting>* routing, const BatchDone& after_batch);

  // ---- Steps (one batch of at most n_batch rows) ---------------------------
  absl::Status BeginBatch(std::span<const int32_t> tokens, int pos0);
  /// Attention of `layer` (grouped-query or multi-head latent, as the
  /// architecture has it), then the residual add.
  void AttentionBlock(int layer);
  /// A layer without experts (ModelConfig::has_experts false): its dense
  /// FFN on the ffn-normed input, then the residual add; in place of
  /// RouteBlock / experts / FinishMoe.
  void DenseFfnBlock(int layer);
  /// Computes the ffn-normed input and the routing of `layer`. The per-row
  /// top-k ids / weights ([n, k], descending weight) are kept in host memory
  /// (last_ids() / last_weights()).
  absl::StatusOr<RoutingPlan> RouteBlock(int layer);
  ConstMat moe_input() const { return {h_, rows_, config_.n_embd}; }
  /// Gate look-ahead (DAOP, DyMoE, FIRM): the k experts `layer`'s router
  /// would choose for one row `input` in backend memory (e.g. an earlier
  /// layer's MoE input), most likely first. Only a prediction: nothing of the
  /// batch in flight is touched (its own small buffer, allocated on first use).
  absl::Status PredictExperts(int layer, ConstMat input, std::vector<int32_t>* ids);
  Mat moe_output() const { return {moe_, rows_, config_.n_embd}; }
  /// The shared expert of `layer` (computed here, on this node, when the
  /// model has one), then the residual add.
  void FinishMoe(int layer);
  /// Logits of the last row of the batch (after the final norm), to host.
  absl::Status Logits(std::vector<float>* logits);
  /// Logits of rows [first, rows()) of the batch, to host: (rows() - first)
  /// rows of n_vocab, row-major. Each row has exactly the bits Logits() gives
  /// when that row is the last of its batch (the backend computes every
  /// output row from its own input row alone; see backend/backend.h). Uses
  /// a [n_batch, n_vocab] buffer allocated on first use, so generation never
  /// pays for it.
  absl::Status RowLogits(int64_t first, std::vector<float>* logits);

  std::span<const int32_t> last_ids() const { return host_ids_; }
  std::span<const float> last_weights() const { return host_weights_; }
  int64_t rows() const { return rows_; }

 private:
  Transformer(const ModelConfig& config, Backend& backend, KvCache kv)
      : config_(config), backend_(backend), kv_(std::move(kv)) {}
  absl::Status AllocateBuffers();
  absl::Status AllocateMlaBuffers();
  void GroupedAttention(int layer);
  /// DeepSeek-V2's attention over the latent cache (transformer_mla.cpp).
  void MlaAttention(int layer);

  const ModelConfig config_;
  Backend& backend_;
  KvCache kv_;
  std::unique_ptr<DenseWeights> weights_;
  int n_batch_ = 0;

  // Activations, [n_batch, width] each, in one backend buffer.
  std::unique_ptr<BackendBuffer> buffer_;
  std::unique_ptr<BackendBuffer> lookahead_;  // PredictExperts: router [e], weights [k], ids [k]
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *attn_ = nullptr, *o_ = nullptr, *moe_ = nullptr, *router_ = nullptr;
  float *logits_ = nullptr, *weights_out_ = nullptr;
  float *shared_out_ = nullptr, *shared_gate_ = nullptr;  // shared expert only
  int32_t *tokens_ = nullptr, *positions_ = nullptr, *ids_out_ = nullptr;
  int32_t* row_index_ = nullptr;  // 0, 1, ..., n_batch - 1 (shared expert only)
  std::unique_ptr<ExpertFfnScratch> shared_scratch_;
  std::unique_ptr<ExpertFfnScratch> dense_scratch_;  // layers without experts
  // MLA only: absorbed queries [n, n_head * head_dim], one head's slices,
  // the heads' values before attn_output, q's low-rank latent.
  std::unique_ptr<BackendBuffer> mla_buffer_;
  float *q_abs_ = nullptr, *head_in_ = nullptr, *head_out_ = nullptr;
  float *o_heads_ = nullptr, *q_lat_ = nullptr;
  std::unique_ptr<BackendBuffer> row_logits_buffer_;  // [n_batch, n_vocab], RowLogits only

  int64_t rows_ = 0;
  int pos0_ = 0;
  std::vector<int32_t> host_positions_;
  std::vector<int32_t> host_ids_;
  std::vector<float> host_weights_;
};

}  // namespace odmoe
