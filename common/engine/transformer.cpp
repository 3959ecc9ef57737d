#include "engine/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Create(const ModelFile& model,
                                                                 Backend& backend,
                                                                 Options options) {
  const ModelConfig& c = model.config();
  const int n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min(c.n_ctx_train, 4096);
  if (options.n_batch < 1) return absl::InvalidArgumentError("n_batch must be >= 1");
  if (options.n_seq < 1 || options.n_seq > 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("n_seq %d: expected 1..4096 sequences", options.n_seq));
  }
  std::vector<KvCache> kv;
  for (int s = 0; s < options.n_seq; ++s) {
    ODMOE_ASSIGN_OR_RETURN(KvCache slot, KvCache::Create(backend, c, n_ctx));
    kv.push_back(std::move(slot));
  }
  std::unique_ptr<Transformer> tf(new Transformer(c, backend, std::move(kv)));
  // A batch holds at most n_ctx rows of each sequence.
  tf->n_batch_ =
      static_cast<int>(std::min<int64_t>(options.n_batch, int64_t{n_ctx} * options.n_seq));
  if (options.logit_buffer_bytes < 1) {
    return absl::InvalidArgumentError("logit_buffer_bytes must be >= 1");
  }
  tf->max_logit_rows_ = std::clamp<int64_t>(
      options.logit_buffer_bytes / (int64_t{c.n_vocab} * 4), 1, tf->n_batch_);
  ODMOE_ASSIGN_OR_RETURN(tf->weights_, DenseWeights::Load(model, backend));
  ODMOE_ASSIGN_OR_RETURN(tf->recurrent_, RecurrentState::Create(backend, c, options.n_seq));
  ODMOE_RETURN_IF_ERROR(tf->AllocateBuffers());
  return tf;
}

absl::Status Transformer::AllocateBuffers() {
  const size_t b = static_cast<size_t>(n_batch_);
  const size_t d = config_.n_embd, qw = config_.q_width(), kvw = config_.kv_width();
  const size_t e = config_.n_expert, k = config_.n_expert_used, v = config_.n_vocab;
  // Layout (floats): x h o moe [b*d each] q attn [b*qw] k v [b*kvw] router [b*e]
  // logits [v] weights [b*k], then int32: ids [b*k] tokens positions [b]
  // routed ids [layers*b*k]; with a shared expert also shared_out [b*d]
  // shared_gate [b] row_index [b].
  const bool shared = config_.n_ff_shared > 0;
  const bool beside = config_.ffn_layout == FfnLayout::kDenseBesideExperts;
  const size_t layers = static_cast<size_t>(config_.n_layer);
  const size_t floats = b * (4 * d + 2 * qw + 2 * kvw + e + k) + v + (shared ? b * (d + 1) : 0) +
                        (beside ? b * d : 0);
  const size_t ints = b * (2 + k) + layers * b * k + (shared ? b : 0);
  ODMOE_ASSIGN_OR_RETURN(buffer_, backend_.Allocate((floats + ints) * 4));
  float* p = static_cast<float*>(buffer_->data());
  auto take = [&p](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  x_ = take(b * d);
  h_ = take(b * d);
  o_ = take(b * d);
  moe_ = take(b * d);
  q_ = take(b * qw);
  attn_ = take(b * qw);
  k_ = take(b * kvw);
  v_ = take(b * kvw);
  router_ = take(b * e);
  logits_ = take(v);
  weights_out_ = take(b * k);
  ids_out_ = reinterpret_cast<int32_t*>(take(b * k));  // right after weights: one copy to host
  tokens_ = reinterpret_cast<int32_t*>(take(b));
  positions_ = reinterpret_cast<int32_t*>(take(b));  // right after tokens: one upload
  routed_ids_ = reinterpret_cast<int32_t*>(take(layers * b * k));
  host_upload_.resize(2 * b);
  if (shared) {
    shared_out_ = take(b * d);
    shared_gate_ = take(b);
    row_index_ = reinterpret_cast<int32_t*>(take(b));
    std::vector<int32_t> rows(b);
    for (size_t i = 0; i < b; ++i) rows[i] = static_cast<int32_t>(i);
    ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(row_index_, rows.data(), b * sizeof(int32_t)));
    ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch scratch,
                           ExpertFfnScratch::Create(backend_, config_.n_ff_shared, n_batch_));
    shared_scratch_ = std::make_unique<ExpertFfnScratch>(std::move(scratch));
  }
  if (config_.has_dense_layers() || beside) {
    const int n_ff = beside ? config_.n_ff_beside : config_.n_ff_dense;
    ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch scratch,
                           ExpertFfnScratch::Create(backend_, n_ff, n_batch_));
    dense_scratch_ = std::make_unique<ExpertFfnScratch>(std::move(scratch));
  }
  if (beside) beside_out_ = take(b * d);
  if (config_.router_input_scaled || config_.rope_qk_rms_norm) {
    const size_t hd = static_cast<size_t>(config_.head_dim);
    ODMOE_ASSIGN_OR_RETURN(llama4_buffer_, backend_.Allocate((b * d + b + hd) * 4));
    scaled_in_ = static_cast<float*>(llama4_buffer_->data());
    row_scales_ = scaled_in_ + b * d;
    ones_ = row_scales_ + b;
    const std::vector<float> ones(hd, 1.0f);
    ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(ones_, ones.data(), hd * 4));
  }
  if (config_.attention == AttentionKind::kMla) return AllocateMlaBuffers();
  if (config_.mamba2) return AllocateMamba2Buffers();
  if (config_.delta_net || config_.attn_output_gate) return AllocateDeltaNetBuffers();
  return absl::OkStatus();
}

absl::Status Transformer::BeginBatch(std::span<const int32_t> tokens, int pos0) {
  const Segment one{0, pos0, static_cast<int64_t>(tokens.size())};
  return BeginSegments(tokens, std::span<const Segment>(&one, 1));
}

absl::Status Transformer::BeginSegments(std::span<const int32_t> tokens,
                                        std::span<const Segment> segments) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 1 || n > n_batch_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch of %d tokens (allowed 1..%d)", n, n_batch_));
  }
  if (segments.empty()) return absl::InvalidArgumentError("a batch needs at least one segment");
  int64_t total = 0;
  std::vector<bool> used(kv_.size(), false);
  for (const Segment& s : segments) {
    if (s.slot < 0 || s.slot >= n_seq() || used[static_cast<size_t>(s.slot)] || s.n < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "segment of %d rows in slot %d (expected >= 1 row, distinct slots in [0, %d))", s.n,
          s.slot, n_seq()));
    }
    used[static_cast<size_t>(s.slot)] = true;
    if (s.pos0 < 0 || s.pos0 + s.n > n_ctx()) {
      return absl::OutOfRangeError(
          absl::StrFormat("positions %d..%d exceed the context of %d tokens", s.pos0,
                          s.pos0 + s.n - 1, n_ctx()));
    }
    total += s.n;
  }
  if (total != n) {
    return absl::InvalidArgumentError(
        absl::StrFormat("segments of %d rows for a batch of %d tokens", total, n));
  }
  for (const Segment& s : segments) ODMOE_RETURN_IF_ERROR(recurrent_.Check(s.slot, s.pos0));
  for (int32_t t : tokens) {
    if (t < 0 || t >= config_.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token id %d outside the vocabulary [0, %d)", t, config_.n_vocab));
    }
  }
  rows_ = n;
  segments_.assign(segments.begin(), segments.end());
  for (const Segment& s : segments_) recurrent_.Begin(s.slot, s.pos0, static_cast<int>(s.n));
  // Tokens and positions in one upload (one wait for the device): positions_
  // follows tokens_ at n_batch words.
  std::copy(tokens.begin(), tokens.end(), host_upload_.begin());
  int32_t* positions = host_upload_.data() + n_batch_;
  int64_t row = 0;
  for (const Segment& s : segments) {
    for (int64_t i = 0; i < s.n; ++i) positions[row++] = s.pos0 + static_cast<int32_t>(i);
  }
  ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(tokens_, host_upload_.data(),
                                               (n_batch_ + n) * sizeof(int32_t)));
  backend_.GetRows(weights_->token_embd(), tokens_, Mat{x_, n, config_.n_embd});
  if (config_.embd_scaled) backend_.Scale(Mat{x_, n, config_.n_embd}, weights_->embd_scale());
  pending_ = nullptr;  // a batch cut short by an error leaves nothing to add
  return absl::OkStatus();
}

void Transformer::NormX(const float* weight, Mat h) {
  const Mat x{x_, rows_, config_.n_embd};
  if (pending_ != nullptr) {
    backend_.AddRmsNorm(x, ConstMat(pending_, rows_, config_.n_embd), weight, config_.rms_eps, h);
    pending_ = nullptr;
  } else {
    backend_.RmsNorm(x, weight, config_.rms_eps, h);
  }
}

void Transformer::AddToX(const float* m) {
  SettleX();  // never two pending: each is added in its turn
  pending_ = m;
}

void Transformer::SettleX() {
  if (pending_ == nullptr) return;
  const Mat x{x_, rows_, config_.n_embd};
  backend_.Add(x, ConstMat(pending_, rows_, config_.n_embd), x);
  pending_ = nullptr;
}

void Transformer::AttentionBlock(int layer) {
  if (config_.mamba2 && config_.is_recurrent(layer)) {
    Mamba2Block(layer);
  } else if (config_.is_recurrent(layer)) {
    DeltaNetBlock(layer);
  } else if (config_.attention == AttentionKind::kMla) {
    MlaAttention(layer);
  } else {
    GroupedAttention(layer);
  }
}

void Transformer::DenseFfnBlock(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  NormX(w.ffn_norm, Mat{h_, rows_, config_.n_embd});
  RunExpertFfn(backend_, w.dense_ffn, moe_input(), *dense_scratch_, moe_output());
  AddToX(moe_);
}

void Transformer::GroupedAttention(int layer) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const int64_t n = rows_;
  const LayerAttention la = c.attention_of(layer);  // head size, KV heads, RoPE of this layer
  const int hd = la.head_dim, kvw = c.kv_width_of(layer);
  const Mat h{h_, n, c.n_embd}, o{o_, n, c.n_embd};
  const Mat q{q_, n, int64_t{c.n_head} * hd}, attn{attn_, n, int64_t{c.n_head} * hd};
  // One sequence writes its new K/V rows straight into its cache; several
  // write them here first, then each segment's rows go to its own slot.
  const bool one = segments_.size() == 1;
  const KvCache& first = kv_[static_cast<size_t>(segments_.front().slot)];
  const Mat k_new = one ? first.k(layer).RowRange(segments_.front().pos0, n) : Mat{k_, n, kvw};
  const Mat v_new = one ? first.v(layer).RowRange(segments_.front().pos0, n) : Mat{v_, n, kvw};
  NormX(w.attn_norm, h);
  if (c.attn_output_gate) {
    GatedQuery(w, h, q);
  } else {
    backend_.MatMul(w.attn_q, h, q);
  }
  if (la.v_from_k) {  // V is K's projection, before K's norm and RoPE
    backend_.MatMul(w.attn_k, h, k_new);
    backend_.Copy(k_new, v_new);
  } else {
    backend_.MatMulPair(w.attn_k, w.attn_v, h, k_new, v_new);
  }
  if (c.attn_bias) {
    backend_.AddBias(q, w.attn_q_bias);
    backend_.AddBias(k_new, w.attn_k_bias);
    backend_.AddBias(v_new, w.attn_v_bias);
  }
  if (c.qk_norm == QkNorm::kPerHead) {  // each head's row of head_dim values
    const Mat qh{q.data, n * c.n_head, hd}, kh{k_new.data, n * la.n_head_kv, hd};
    backend_.RmsNorm(qh, w.attn_q_norm, c.rms_eps, qh);
    backend_.RmsNorm(kh, w.attn_k_norm, c.rms_eps, kh);
  } else if (c.qk_norm == QkNorm::kFull) {
    backend_.RmsNorm(q, w.attn_q_norm, c.rms_eps, q);
    backend_.RmsNorm(k_new, w.attn_k_norm, c.rms_eps, k_new);
  }
  if (c.v_norm) {  // each V head RMS-normed, no weight
    const Mat vh{v_new.data, n * la.n_head_kv, hd};
    backend_.RmsNorm(vh, weights_->ones(), c.rms_eps, vh);
  }
  RopeParams rope;
  rope.dims = la.rope_dims;
  rope.freq_base = la.rope_freq_base;
  rope.rotated_pairs = la.rope_pairs;
  rope.mode = c.rope_mode;
  rope.scaling = c.rope_scaling;
  if (c.rope_of(layer) && !c.no_rope) backend_.RopePair(q, k_new, hd, positions_, rope);
  if (c.rope_qk_rms_norm && c.rope_of(layer)) {  // Llama 4: weightless, after RoPE
    const Mat qh{q.data, n * c.n_head, hd}, kh{k_new.data, n * la.n_head_kv, hd};
    backend_.RmsNorm(qh, ones_, c.rms_eps, qh);
    backend_.RmsNorm(kh, ones_, c.rms_eps, kh);
  }
  const float scale = c.attn_scale;
  AttentionOptions options;
  options.sinks = w.attn_sinks;  // null without sinks
  options.window = c.window_of(layer);
  int64_t row = 0;
  for (const Segment& s : segments_) {
    const KvCache& kv = kv_[static_cast<size_t>(s.slot)];
    if (!one) {
      backend_.Copy(k_new.RowRange(row, s.n), kv.k(layer).RowRange(s.pos0, s.n));
      backend_.Copy(v_new.RowRange(row, s.n), kv.v(layer).RowRange(s.pos0, s.n));
    }
    if (c.nope_layer_step > 0) {
      AttendRuns(layer, kv, q.RowRange(row, s.n), s.pos0, options, attn.RowRange(row, s.n));
    } else {
      backend_.Attention(q.RowRange(row, s.n), kv.k(layer), kv.v(layer), c.n_head, la.n_head_kv,
                         hd, s.pos0, scale, options, attn.RowRange(row, s.n));
    }
    row += s.n;
  }
  if (c.attn_output_gate) ApplyOutputGate(attn);
  backend_.MatMul(w.attn_output, attn, o);
  if (w.attn_output_bias != nullptr) backend_.AddBias(o, w.attn_output_bias);
  if (w.attn_post_norm != nullptr) backend_.RmsNorm(o, w.attn_post_norm, c.rms_eps, o);
  AddToX(o_);
}

RouterGating Transformer::LayerGating(int layer) const {
  RouterGating g = config_.gating;
  g.selection_bias = weights_->layer(layer).selection_bias;  // null without one
  return g;
}

void Transformer::RouterBlock(int layer, int32_t* ids, float* weights) {
  const DenseLayerWeights& w = weights_->layer(layer);
  const ModelConfig& c = config_;
  const int64_t n = rows_;
  const Mat h{h_, n, c.n_embd}, router{router_, n, c.n_expert};
  if (c.ffn_layout == FfnLayout::kDenseBesideExperts) {
    // Gemma 4: the dense FFN now, the router's input into o, the experts' into h.
    DenseBesideExperts(layer);
    backend_.MatMul(w.router, ConstMat(o_, n, c.n_embd), router);
    if (w.router_bias != nullptr) backend_.AddBias(router, w.router_bias);
    backend_.RouterTopK(router, c.n_expert_used, LayerGating(layer), ids, weights);
    return;
  }
  NormX(w.ffn_norm, h);
  backend_.MatMul(w.router, h, router);
  if (w.router_bias != nullptr) backend_.AddBias(router, w.router_bias);
  backend_.RouterTopK(router, c.n_expert_used, LayerGating(layer), ids, weights);
}

absl::StatusOr<RoutingPlan> Transformer::RouteBlock(int layer) {
  const ModelConfig& c = config_;
  const int64_t n = rows_;
  const int k = c.n_expert_used;
  RouterBlock(layer, ids_out_, weights_out_);
  // One copy (one wait for the device) of weights [b*k] and the ids after them.
  const size_t nk = static_cast<size_t>(n * k), bk = static_cast<size_t>(n_batch_) * k;
  host_route_.resize(bk + nk);
  ODMOE_RETURN_IF_ERROR(
      backend_.CopyToHost(host_route_.data(), weights_out_, (bk + nk) * sizeof(float)));
  host_ids_.resize(nk);
  std::memcpy(host_ids_.data(), host_route_.data() + bk, nk * sizeof(int32_t));
  if (c.expert_weight_scale) ODMOE_RETURN_IF_ERROR(ScaleExpertWeights(layer, nk));
  host_weights_.assign(host_route_.begin(), host_route_.begin() + static_cast<int64_t>(nk));
  ODMOE_ASSIGN_OR_RETURN(RoutingPlan plan,
                         RoutingPlan::Build(host_ids_, host_weights_, k, c.n_expert));
  plan.backend_weights = weights_out_;
  plan.weights_backend = &backend_;
  return plan;
}

absl::Status Transformer::PredictExperts(int layer, ConstMat input, std::vector<int32_t>* ids,
                                         int candidates) {
  const ModelConfig& c = config_;
  if (layer < 0 || layer >= c.n_layer || !c.has_experts(layer) || input.rows != 1 ||
      input.cols != c.n_embd) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot predict the experts of layer %d from %d x %d rows", layer, input.rows, input.cols));
  }
  if (candidates < 0) return absl::InvalidArgumentError("negative candidate count");
  const int k = std::min(candidates == 0 ? c.n_expert_used : candidates, c.n_expert);
  if (lookahead_ == nullptr) {
    ODMOE_ASSIGN_OR_RETURN(lookahead_,
                           backend_.Allocate(static_cast<size_t>(3 * c.n_expert + c.n_embd) * 4));
  }
  float* router = static_cast<float*>(lookahead_->data());
  float* weights = router + c.n_expert;
  int32_t* out = reinterpret_cast<int32_t*>(weights + c.n_expert);
  const DenseLayerWeights& w = weights_->layer(layer);
  const Mat logits{router, 1, c.n_expert};
  if (c.router_input == RouterInput::kScaledRms) {  // the router's own input norm
    const Mat normed{reinterpret_cast<float*>(out + c.n_expert), 1, c.n_embd};
    backend_.RmsNorm(input, w.router_input_norm, c.rms_eps, normed);
    input = normed;
  }
  backend_.MatMul(w.router, input, logits);
  if (w.router_bias != nullptr) backend_.AddBias(logits, w.router_bias);
  backend_.RouterTopK(logits, k, LayerGating(layer), out, weights);
  ids->resize(static_cast<size_t>(k));
  return backend_.CopyToHost(ids->data(), out, static_cast<size_t>(k) * sizeof(int32_t));
}

absl::StatusOr<ConstMat> Transformer::KeepInput(int slot, ConstMat input) {
  const int64_t d = config_.n_embd;
  if (slot < 0 || slot >= kKeptInputs || input.rows != 1 || input.cols != d) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot keep a %d x %d input in slot %d", input.rows, input.cols, slot));
  }
  if (kept_ == nullptr) {
    ODMOE_ASSIGN_OR_RETURN(kept_, backend_.Allocate(static_cast<size_t>(kKeptInputs * d) * 4));
  }
  float* row = static_cast<float*>(kept_->data()) + slot * d;
  backend_.Copy(input, Mat{row, 1, d});
  return ConstMat(row, 1, d);
}

void Transformer::FinishMoe(int layer) {
  if (config_.ffn_layout == FfnLayout::kDenseBesideExperts) {
    FinishDenseBesideExperts(layer);
    return;
  }
  if (config_.n_ff_shared > 0) {
    // moe += sigmoid(h . g) * shared(h), row by row (h is still the ffn-normed input).
    const DenseLayerWeights& w = weights_->layer(layer);
    const Mat shared{shared_out_, rows_, config_.n_embd}, gate{shared_gate_, rows_, 1};
    RunExpertFfn(backend_, w.shared_expert, moe_input(), *shared_scratch_, shared);
    if (config_.shared_gated) {
      backend_.MatMul(w.shared_gate, moe_input(), gate);
      backend_.Sigmoid(gate);
      backend_.ScatterAddScaled(shared, row_index_, shared_gate_, moe_output());
    } else {  // DeepSeek: moe += shared(h)
      backend_.Add(moe_output(), shared, moe_output());
    }
  }
  AddToX(moe_);
}

void Transformer::HeadRows(std::span<const int64_t> rows, Mat out) {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(rows.size());
  bool contiguous = true;
  for (int64_t i = 1; i < n; ++i) contiguous = contiguous && rows[i] == rows[0] + i;
  Mat in{x_ + rows[0] * c.n_embd, n, c.n_embd};
  if (!contiguous) {
    in = Mat{o_, n, c.n_embd};
    for (int64_t i = 0; i < n; ++i) {
      backend_.Copy(ConstMat{x_ + rows[i] * c.n_embd, 1, c.n_embd}, in.RowRange(i, 1));
    }
  }
  const Mat h{h_, n, c.n_embd};
  backend_.RmsNorm(in, weights_->output_norm(), c.rms_eps, h);
  backend_.MatMul(weights_->output(), h, out);
  if (c.final_logit_softcap > 0) backend_.SoftCap(out, c.final_logit_softcap);
}

absl::Status Transformer::SegmentLogits(std::vector<float>* logits) {
  if (segments_.size() == 1) return Logits(logits);
  std::vector<int64_t> last;
  int64_t row = 0;
  for (const Segment& s : segments_) {
    row += s.n;
    last.push_back(row - 1);
  }
  return LogitsOfRows(last, logits);
}

absl::Status Transformer::ForEachHeadPiece(
    std::span<const int64_t> rows, const std::function<absl::Status(int64_t, Mat)>& fn) {
  const ModelConfig& c = config_;
  for (int64_t r : rows) {
    if (r < 0 || r >= rows_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("row %d is outside the batch of %d rows", r, rows_));
    }
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) return absl::OkStatus();
  const int64_t piece = std::min(max_logit_rows(), n);
  if (row_logits_rows_ < piece) {  // grown to what a call needs, never past max_logit_rows()
    row_logits_buffer_.reset();
    ODMOE_ASSIGN_OR_RETURN(row_logits_buffer_,
                           backend_.Allocate(static_cast<size_t>(piece) * c.n_vocab * 4));
    row_logits_rows_ = piece;
  }
  for (int64_t begin = 0; begin < n; begin += piece) {
    const int64_t m = std::min(piece, n - begin);
    const Mat out{static_cast<float*>(row_logits_buffer_->data()), m, c.n_vocab};
    HeadRows(rows.subspan(static_cast<size_t>(begin), static_cast<size_t>(m)), out);
    ODMOE_RETURN_IF_ERROR(fn(begin, out));
  }
  return absl::OkStatus();
}

absl::Status Transformer::LogitsOfRows(std::span<const int64_t> rows, std::vector<float>* logits) {
  const int64_t v = config_.n_vocab;
  logits->resize(rows.size() * static_cast<size_t>(v));
  return ForEachHeadPiece(rows, [&](int64_t begin, Mat out) {
    return backend_.CopyToHost(logits->data() + begin * v, out.data,
                               static_cast<size_t>(out.rows * v) * sizeof(float));
  });
}

absl::Status Transformer::ScoresOfRows(std::span<const int64_t> rows,
                                       std::span<const int32_t> targets,
                                       std::vector<LogitRowScore>* scores) {
  if (targets.size() != rows.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d targets for %d rows to score", targets.size(), rows.size()));
  }
  scores->resize(rows.size());
  return ForEachHeadPiece(rows, [&](int64_t begin, Mat out) {
    return backend_.ScoreLogitRows(out, targets.data() + begin, scores->data() + begin);
  });
}

absl::Status Transformer::Logits(std::vector<float>* logits) {
  const ModelConfig& c = config_;
  const Mat last{x_ + (rows_ - 1) * c.n_embd, 1, c.n_embd};
  const Mat h{h_, 1, c.n_embd};
  backend_.RmsNorm(last, weights_->output_norm(), c.rms_eps, h);
  backend_.MatMul(weights_->output(), h, Mat{logits_, 1, c.n_vocab});
  if (c.final_logit_softcap > 0)
    backend_.SoftCap(Mat{logits_, 1, c.n_vocab}, c.final_logit_softcap);
  logits->resize(static_cast<size_t>(c.n_vocab));
  return backend_.CopyToHost(logits->data(), logits_, c.n_vocab * sizeof(float));
}

absl::Status Transformer::RowLogits(int64_t first, std::vector<float>* logits) {
  if (first < 0 || first >= rows_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("row %d is outside the batch of %d rows", first, rows_));
  }
  std::vector<int64_t> rows(static_cast<size_t>(rows_ - first));
  std::iota(rows.begin(), rows.end(), first);
  return LogitsOfRows(rows, logits);
}

absl::Status Transformer::ForwardBatches(std::span<const int32_t> tokens, int pos0,
                                         ExpertExecutor& experts,
                                         std::vector<TokenRouting>* routing,
                                         const BatchDone& after_batch) {
  if (tokens.empty()) return absl::InvalidArgumentError("forward of an empty token list");
  const int k = config_.n_expert_used;
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(n_batch_)) {
    const size_t n = std::min(tokens.size() - begin, static_cast<size_t>(n_batch_));
    ODMOE_RETURN_IF_ERROR(BeginBatch(tokens.subspan(begin, n), pos0 + static_cast<int>(begin)));
    const size_t first_record = routing ? routing->size() : 0;
    // Layers without experts keep -1 in their routing slots.
    if (routing) {
      routing->resize(first_record + n,
                      TokenRouting(static_cast<size_t>(config_.n_layer) * k, -1));
    }
    ODMOE_RETURN_IF_ERROR(RunLayers(experts, routing, first_record));
    if (after_batch) ODMOE_RETURN_IF_ERROR(after_batch(static_cast<int64_t>(begin)));
  }
  return absl::OkStatus();
}

absl::Status Transformer::RunLayers(ExpertExecutor& experts, std::vector<TokenRouting>* routing,
                                    size_t first_record) {
  const int k = config_.n_expert_used;
  const int64_t layer_ids = static_cast<int64_t>(n_batch_) * k;  // routed ids per layer
  std::vector<int> routed;  // with records asked for: layers whose routing stayed on the backend
  for (int l = 0; l < config_.n_layer; ++l) {
    if (config_.has_mixer(l)) AttentionBlock(l);
    if (!config_.has_ffn(l)) continue;  // a hybrid's mixer layer
    if (!config_.has_experts(l)) {
      DenseFfnBlock(l);
      ScaleLayerOutput(l);
      continue;
    }
    // Per-expert weight scales are applied to the routing on the host; a
    // router that scales the experts' input (Llama 4) runs the plan.
    if (!config_.expert_weight_scale && !config_.router_input_scaled &&
        experts.CanRunRouted(backend_, l, rows_)) {
      int32_t* ids = routed_ids_ + l * layer_ids;
      RouterBlock(l, ids, weights_out_);
      ODMOE_RETURN_IF_ERROR(experts.RunRouted(l, moe_input(), ids, weights_out_, k, moe_output()));
      FinishMoe(l);
      if (routing != nullptr) routed.push_back(l);
      continue;
    }
    ODMOE_ASSIGN_OR_RETURN(RoutingPlan plan, RouteBlock(l));
    if (config_.router_input_scaled) ODMOE_RETURN_IF_ERROR(ScaleRoutedInput());
    ODMOE_RETURN_IF_ERROR(experts.Run(l, routed_input(), plan, moe_output()));
    FinishMoe(l);
    ScaleLayerOutput(l);
    if (routing) {
      for (int64_t t = 0; t < rows_; ++t) {
        std::copy_n(host_ids_.begin() + t * k, k,
                    (*routing)[first_record + static_cast<size_t>(t)].begin() +
                        static_cast<ptrdiff_t>(l) * k);
      }
    }
  }
  SettleX();  // the last block's residual: x is read by the head and the caller
  for (const Segment& s : segments_) recurrent_.Commit(s.slot);
  if (routing != nullptr && !routed.empty()) {
    // The routed layers' records, in one copy after the whole step.
    std::vector<int32_t> ids(static_cast<size_t>(config_.n_layer * layer_ids));
    ODMOE_RETURN_IF_ERROR(
        backend_.CopyToHost(ids.data(), routed_ids_, ids.size() * sizeof(int32_t)));
    for (const int l : routed) {
      for (int64_t t = 0; t < rows_; ++t) {
        std::copy_n(ids.begin() + l * layer_ids + t * k, k,
                    (*routing)[first_record + static_cast<size_t>(t)].begin() +
                        static_cast<ptrdiff_t>(l) * k);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Transformer::ForwardSegments(std::span<const int32_t> tokens,
                                          std::span<const Segment> segments,
                                          ExpertExecutor& experts) {
  ODMOE_RETURN_IF_ERROR(BeginSegments(tokens, segments));
  return RunLayers(experts, nullptr, 0);
}

absl::Status Transformer::Forward(std::span<const int32_t> tokens, int pos0,
                                  ExpertExecutor& experts, std::vector<float>* logits,
                                  std::vector<TokenRouting>* routing) {
  ODMOE_RETURN_IF_ERROR(ForwardBatches(tokens, pos0, experts, routing, nullptr));
  if (logits) return Logits(logits);
  return absl::OkStatus();
}

}  // namespace odmoe
