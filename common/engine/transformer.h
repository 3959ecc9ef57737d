// The Mixture-of-Experts transformer, layer by layer, on one backend.
//
// Forward() runs a batch of tokens through every layer and asks an
// ExpertExecutor for the experts of each MoE block, so the same code serves
// the single-process engine (local experts), the shadow node (local
// quantized experts) and the cluster's main node (remote experts). The
// steps of a forward (the layer blocks are private: each leaves its residual
// add pending for the next norm, so x is whole only between forwards):
//
//   BeginBatch(tokens, pos0)               embeddings -> x (or BeginSegments: rows of
//                                          several sequences, each with its own KV slot)
//   for each layer l (RunLayers):
//     AttentionBlock(l)                    (MLA: see transformer_mla.cpp)                    x +=
//     Wo * attn(rope(qn(Wq h + bq)), rope(kn(Wk h + bk)),
//                                          Wv h + bv), h = rmsnorm(x) * attn_norm; K/V rows
//                                          cached; biases, q/k norms, sinks, a
//                                          sliding window (ModelConfig::window_of)
//                                          and YaRN where the architecture has them
//                                          (model_arch.h)
//     (a recurrent layer: DeltaNetBlock(l), Gated DeltaNet on the slot's
//                                          RecurrentState: transformer_delta_net.cpp)
//     RouteBlock(l)                        h = rmsnorm(x) * ffn_norm; top-k of router(h)
//                                          (+ router bias) with the architecture's gating
//     ... experts(h) -> moe_output() ...   (ExpertExecutor::Run, or RunRouted from
//                                          the routing left on the backend: RouterBlock)
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
//
// Several sequences (continuous batching): Options::n_seq KV slots, and a
// batch made of segments, each a run of rows of one sequence at its own
// positions in its own slot. Every per-row step (projections, norms, rope,
// routing, experts, the LM head) runs once over all rows; attention runs per
// segment against that segment's slot. A row's result does not depend on
// the other segments of its batch (the backend computes each output row from
// its own input row alone), so a sequence's tokens are the same alone or
// batched:
//
//   const Transformer::Segment segs[] = {{0, 17, 1}, {1, 5, 1}};  // two decode rows
//   ODMOE_RETURN_IF_ERROR(tf->BeginSegments(next_tokens, segs));
//   ... layers as above ...
//   ODMOE_RETURN_IF_ERROR(tf->SegmentLogits(&logits));  // [2, n_vocab]
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
#include "engine/recurrent_state.h"
#include "model/model_file.h"

namespace odmoe {

/// Expert ids chosen at every layer for one token: [n_layer * k], each
/// layer's k ids in descending routing weight.
using TokenRouting = std::vector<int32_t>;

class Transformer {
 public:
  struct Options {
    int n_ctx = 0;     // KV capacity per sequence; 0 = min(training context, 4096)
    int n_batch = 64;  // rows per forward chunk (at most n_ctx * n_seq are used)
    int n_seq = 1;     // sequences with their own KV cache (slots 0..n_seq-1)
    /// Bytes of logits the LM head computes per pass in LogitsOfRows (at
    /// least one row, at most n_batch rows): bounds that buffer for large
    /// vocabularies and batches.
    int64_t logit_buffer_bytes = int64_t{256} << 20;
  };

  /// `n` rows of the sequence in KV slot `slot`, at positions [pos0, pos0 + n).
  struct Segment {
    int slot = 0;
    int pos0 = 0;
    int64_t n = 0;
  };

  static absl::StatusOr<std::unique_ptr<Transformer>> Create(const ModelFile& model,
                                                             Backend& backend, Options options);

  const ModelConfig& config() const { return config_; }
  Backend& backend() const { return backend_; }
  int n_ctx() const { return kv_.front().capacity(); }
  int n_batch() const { return n_batch_; }
  int n_seq() const { return static_cast<int>(kv_.size()); }
  /// The KV cache of slot `slot` (0 for a single sequence).
  KvCache& kv_cache(int slot = 0) { return kv_[static_cast<size_t>(slot)]; }
  /// The recurrent layers' per-slot state (empty for a model without them;
  /// recurrent_state.h says how a slot's rows may continue, roll back and
  /// what it costs).
  const RecurrentState& recurrent_state() const { return recurrent_; }
  /// Forgets the sequence of `slot` (a cancelled request): its next forward
  /// must start at position 0. KV rows need no clearing; free.
  void ClearSequence(int slot) { recurrent_.Clear(slot); }

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

  /// One batch of rows of several sequences through every layer
  /// (BeginSegments, then the layers); SegmentLogits() then gives each
  /// segment's next-token logits.
  absl::Status ForwardSegments(std::span<const int32_t> tokens, std::span<const Segment> segments,
                               ExpertExecutor& experts);

  // ---- Steps (one batch of at most n_batch rows) ---------------------------
  /// One sequence in slot 0: BeginSegments(tokens, {{0, pos0, n}}).
  absl::Status BeginBatch(std::span<const int32_t> tokens, int pos0);
  /// Rows of several sequences: `tokens` holds each segment's rows in order.
  /// INVALID_ARGUMENT unless the segments are non-empty, their rows add up
  /// to tokens.size() <= n_batch, and their slots are distinct and in
  /// [0, n_seq); OUT_OF_RANGE when a segment's positions pass n_ctx.
  absl::Status BeginSegments(std::span<const int32_t> tokens, std::span<const Segment> segments);
  std::span<const Segment> segments() const { return segments_; }
  /// Gate look-ahead (DAOP, DyMoE, FIRM): the `candidates` experts (0 = the
  /// model's k; at most n_expert) `layer`'s router would choose for one row
  /// `input` in backend memory (e.g. an earlier layer's MoE input), most
  /// likely first. Only a prediction: nothing of the batch in flight is
  /// touched (its own small buffer, allocated on first use).
  absl::Status PredictExperts(int layer, ConstMat input, std::vector<int32_t>* ids,
                              int candidates = 0);
  /// Keeps a copy of one row `input` (backend memory, n_embd wide) in slot
  /// `slot` (0 .. kKeptInputs - 1) for later PredictExperts calls (FIRM's
  /// votes of earlier layers); returns the kept row.
  static constexpr int kKeptInputs = 8;
  absl::StatusOr<ConstMat> KeepInput(int slot, ConstMat input);
  /// Logits of the last row of the batch (after the final norm), to host.
  absl::Status Logits(std::vector<float>* logits);
  /// Logits of the last row of every segment, to host: segments().size()
  /// rows of n_vocab. Each row has exactly the bits Logits() gives for that
  /// sequence alone.
  absl::Status SegmentLogits(std::vector<float>* logits);
  /// Logits of rows [first, rows()) of the batch, to host: (rows() - first)
  /// rows of n_vocab, row-major: LogitsOfRows of those rows.
  absl::Status RowLogits(int64_t first, std::vector<float>* logits);
  /// Logits of the given rows of the batch (any order, each in [0, rows())),
  /// to host: rows.size() rows of n_vocab, row-major, in the order given.
  /// Each row has exactly the bits Logits() gives when that row is the last
  /// of its batch (the backend computes every output row from its own input
  /// row alone; see backend/backend.h). The head runs on at most
  /// max_logit_rows() rows at a time, in a buffer allocated on first use (as
  /// large as the calls need), so generation never pays for it. INVALID_ARGUMENT for a row outside
  /// the batch.
  absl::Status LogitsOfRows(std::span<const int64_t> rows, std::vector<float>* logits);
  /// The scores (backend/logit_scores.h) of the given rows' logits against
  /// targets[i] (-1: none), computed where the logits are (the backend's
  /// ScoreLogitRows), so only the scores come to the host: the head on
  /// max_logit_rows() rows at a time as LogitsOfRows, the same logits.
  absl::Status ScoresOfRows(std::span<const int64_t> rows, std::span<const int32_t> targets,
                            std::vector<LogitRowScore>* scores);
  /// Rows the LM head computes per pass in LogitsOfRows: n_batch, or fewer
  /// where n_batch rows of logits would pass Options::logit_buffer_bytes.
  int64_t max_logit_rows() const { return max_logit_rows_; }

  int64_t rows() const { return rows_; }

 private:
  Transformer(const ModelConfig& config, Backend& backend, std::vector<KvCache> kv)
      : config_(config), backend_(backend), kv_(std::move(kv)) {}
  /// Every layer on the batch begun; routing rows from `first_record` on.
  absl::Status RunLayers(ExpertExecutor& experts, std::vector<TokenRouting>* routing,
                         size_t first_record);
  // The blocks of a layer, in RunLayers' order. Each block's residual add
  // is left pending (AddToX) and made by the next norm (NormX) or SettleX,
  // so x is only whole again after RunLayers.
  /// Attention of `layer` (grouped-query or multi-head latent, as the
  /// architecture has it), then the residual add (pending).
  void AttentionBlock(int layer);
  /// A layer without experts (ModelConfig::has_experts false): its dense
  /// FFN on the ffn-normed input, then the residual add (pending); in place of
  /// RouteBlock / experts / FinishMoe.
  void DenseFfnBlock(int layer);
  /// Computes the ffn-normed input and the routing of `layer`, brought to
  /// the host as a plan (the per-row top-k ids / weights, [n, k] in
  /// descending weight, regrouped by expert). (A layer that an executor runs
  /// from the routing on the backend, ExpertExecutor::CanRunRouted, takes
  /// RouterBlock instead: its routing never comes to the host mid-step.)
  absl::StatusOr<RoutingPlan> RouteBlock(int layer);
  /// The ffn-normed input and RouterTopK's [n, k] ids / weights of `layer`
  /// into `ids` / `weights` (backend memory).
  void RouterBlock(int layer, int32_t* ids, float* weights);
  /// The model's gating with `layer`'s correction bias (sigmoid routing).
  RouterGating LayerGating(int layer) const;
  ConstMat moe_input() const { return {h_, rows_, config_.n_embd}; }
  /// What the executors read: moe_input(), or with a router that scales the
  /// expert's input (ArchBlocks::router_input_scaled) its rows times their
  /// weights (ScaleRoutedInput).
  ConstMat routed_input() const {
    return config_.router_input_scaled ? ConstMat{scaled_in_, rows_, config_.n_embd} : moe_input();
  }
  /// routed_input() = each row of moe_input() times sigmoid(its chosen
  /// logit), from the router's logits and RouteBlock's ids (Llama 4).
  absl::Status ScaleRoutedInput();
  /// Backend::Attention of rows [row, row + n) at positions [pos0, pos0 + n)
  /// of one sequence, in runs of one chunk and one temperature where the
  /// layer has them (Llama 4: ModelConfig::chunk_of, attn_temperature_of).
  void AttendRuns(int layer, const KvCache& kv, ConstMat q, int pos0,
                  const AttentionOptions& options, Mat out);
  Mat moe_output() const { return {moe_, rows_, config_.n_embd}; }
  /// The shared expert of `layer` (computed here, on this node, when the
  /// model has one), then the residual add (pending).
  void FinishMoe(int layer);
  /// The LM head on `n` rows of x starting at `rows` (one per entry, gathered
  /// into o_ when not contiguous) into `out` [n, n_vocab] in backend memory.
  void HeadRows(std::span<const int64_t> rows, Mat out);
  /// The head on `rows` (checked to be in the batch) max_logit_rows() at a
  /// time into the row-logits buffer; fn(first index of the piece, its logits).
  absl::Status ForEachHeadPiece(std::span<const int64_t> rows,
                                const std::function<absl::Status(int64_t, Mat)>& fn);
  absl::Status AllocateBuffers();
  /// h = RmsNorm(x) with `weight`, the residual pending from the block
  /// before added to x first (Backend::AddRmsNorm: one pass on a device).
  void NormX(const float* weight, Mat h);
  /// Ends a block: x += m ([rows, n_embd]) before x is next read (by NormX,
  /// fused with its norm, or by SettleX).
  void AddToX(const float* m);
  /// Adds the pending residual to x now (after the last layer).
  void SettleX();
  absl::Status AllocateMlaBuffers();
  // Gemma 4's blocks (transformer_gemma.cpp).
  /// FfnLayout::kDenseBesideExperts, before the router: the dense FFN of the
  /// ffn-normed x into beside_out_ (then post_ffw_norm_1), the router's
  /// input into o_ and the experts' (pre_ffw_norm_2) into h_.
  void DenseBesideExperts(int layer);
  /// After the experts: moe = post_ffw_norm(post_ffw_norm_2(moe) +
  /// beside_out_), then the residual add (pending).
  void FinishDenseBesideExperts(int layer);
  /// x *= the layer's output scale, where the file has one.
  void ScaleLayerOutput(int layer);
  /// The host's routing weights (host_route_, the first `nk`) times their
  /// experts' scales, copied back to the backend's weights.
  absl::Status ScaleExpertWeights(int layer, size_t nk);
  void GroupedAttention(int layer);
  /// DeepSeek-V2's attention over the latent cache (transformer_mla.cpp).
  void MlaAttention(int layer);
  /// Gated DeltaNet in a recurrent layer (transformer_delta_net.cpp), then
  /// the residual add (pending).
  void DeltaNetBlock(int layer);
  absl::Status AllocateDeltaNetBuffers();
  /// Mamba-2 in a hybrid's kMamba2 layer (transformer_mamba2.cpp), then the
  /// residual add (pending).
  void Mamba2Block(int layer);
  absl::Status AllocateMamba2Buffers();
  /// With ArchBlocks::attn_output_gate: q and the gate from the doubled q
  /// projection of h (per head [q | gate]) into q_ / gate_.
  void GatedQuery(const DenseLayerWeights& w, ConstMat h, Mat q);
  /// attn *= sigmoid(gate) (attn_output_gate).
  void ApplyOutputGate(Mat attn);

  const ModelConfig config_;
  Backend& backend_;
  std::vector<KvCache> kv_;  // one per sequence slot
  std::unique_ptr<DenseWeights> weights_;
  int n_batch_ = 0;
  int64_t max_logit_rows_ = 1;

  // Activations, [n_batch, width] each, in one backend buffer.
  std::unique_ptr<BackendBuffer> buffer_;
  std::unique_ptr<BackendBuffer> lookahead_;  // PredictExperts: router [e], weights [e], ids [e]
  std::unique_ptr<BackendBuffer> kept_;       // KeepInput: kKeptInputs rows of n_embd
  float *x_ = nullptr, *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *attn_ = nullptr, *o_ = nullptr, *moe_ = nullptr, *router_ = nullptr;
  float *logits_ = nullptr, *weights_out_ = nullptr;
  float *shared_out_ = nullptr, *shared_gate_ = nullptr;  // shared expert only
  float* beside_out_ = nullptr;  // FfnLayout::kDenseBesideExperts: the dense FFN's output
  int32_t *tokens_ = nullptr, *positions_ = nullptr, *ids_out_ = nullptr;
  int32_t* routed_ids_ = nullptr;  // [n_layer][n_batch * k]: routed layers' ids, one copy a step
  int32_t* row_index_ = nullptr;   // 0, 1, ..., n_batch - 1 (shared expert only)
  std::unique_ptr<ExpertFfnScratch> shared_scratch_;
  std::unique_ptr<ExpertFfnScratch> dense_scratch_;  // layers without experts
  // MLA only: absorbed queries [n, n_head * head_dim], one head's slices,
  // the heads' values before attn_output, q's low-rank latent; for a one-row
  // step every head's q_nope [n_head, qk_nope] and k_b product [n_head,
  // kv_lora_rank], and the head numbers 0 .. n_head - 1 (MatMulById's ids).
  std::unique_ptr<BackendBuffer> mla_buffer_;
  // Llama 4: the routed rows scaled by their weights [b*d], the weights [b],
  // ones [head_dim] (the weightless q/k norm); the router's logits on the host.
  std::unique_ptr<BackendBuffer> llama4_buffer_;
  float *scaled_in_ = nullptr, *row_scales_ = nullptr, *ones_ = nullptr;
  std::vector<float> host_logits_;
  float *q_abs_ = nullptr, *head_in_ = nullptr, *head_out_ = nullptr;
  float *o_heads_ = nullptr, *q_lat_ = nullptr;
  float *heads_nope_ = nullptr, *heads_absorbed_ = nullptr;
  int32_t* head_ids_ = nullptr;
  // Gated DeltaNet and the gated attention (transformer_delta_net.cpp):
  // [n_batch, width] each.
  RecurrentState recurrent_;
  std::unique_ptr<BackendBuffer> delta_buffer_;
  float *dn_qkv_ = nullptr, *dn_conv_ = nullptr, *dn_z_ = nullptr, *dn_ba_ = nullptr;
  float *dn_beta_ = nullptr, *dn_alpha_ = nullptr, *dn_core_ = nullptr;
  float *q_full_ = nullptr, *gate_ = nullptr;  // attn_output_gate
  // Mamba-2 (transformer_mamba2.cpp): [n_batch, width] each.
  std::unique_ptr<BackendBuffer> mamba_buffer_;
  float *mb_proj_ = nullptr, *mb_xbc_ = nullptr, *mb_conv_ = nullptr;
  float *mb_z_ = nullptr, *mb_y_ = nullptr, *mb_dt_ = nullptr;
  // [row_logits_rows_ <= max_logit_rows, n_vocab], LogitsOfRows / ScoresOfRows only.
  std::unique_ptr<BackendBuffer> row_logits_buffer_;
  int64_t row_logits_rows_ = 0;

  int64_t rows_ = 0;
  const float* pending_ = nullptr;    // [rows, n_embd] to add to x before it is read (AddToX)
  std::vector<Segment> segments_;     // of the batch in flight
  std::vector<int32_t> host_upload_;  // BeginSegments: tokens [n_batch], then positions [n_batch]
  std::vector<int32_t> host_ids_;
  std::vector<float> host_weights_;
  std::vector<float> host_route_;  // RouteBlock's copy: weights [n_batch * k], then ids
};

}  // namespace odmoe
