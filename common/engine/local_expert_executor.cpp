#include "engine/local_expert_executor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/env_flag.h"
#include "util/status_macros.h"
#include "util/step_progress.h"

namespace odmoe {

bool RoutedRunsEnabled() { return EnvFlagOn("ODMOE_ROUTED_EXPERTS"); }

absl::StatusOr<ExpertWeights> LoadExpertWeights(
    Backend& backend, const ModelFile& model, int layer, int expert,
    std::vector<std::unique_ptr<BackendBuffer>>* storage) {
  const ModelConfig& c = model.config();
  const ExpertTensors t = model.Expert(layer, expert);
  auto load = [&](const TensorView& v) -> absl::StatusOr<WeightRef> {
    ODMOE_ASSIGN_OR_RETURN(BackendWeight w, backend.LoadWeight(v));
    if (w.storage) storage->push_back(std::move(w.storage));
    return w.ref;
  };
  ExpertWeights w;
  ODMOE_ASSIGN_OR_RETURN(w.gate, load(t.gate));
  ODMOE_ASSIGN_OR_RETURN(w.up, load(t.up));
  ODMOE_ASSIGN_OR_RETURN(w.down, load(t.down));
  if (c.expert_bias) {
    auto floats = [&](const TensorView& v) -> absl::StatusOr<const float*> {
      ODMOE_ASSIGN_OR_RETURN(WeightRef r, load(v));
      return static_cast<const float*>(r.data);
    };
    ODMOE_ASSIGN_OR_RETURN(w.gate_bias, floats(t.gate_bias));
    ODMOE_ASSIGN_OR_RETURN(w.up_bias, floats(t.up_bias));
    ODMOE_ASSIGN_OR_RETURN(w.down_bias, floats(t.down_bias));
  }
  w.activation = c.expert_activation;
  return w;
}

absl::StatusOr<std::unique_ptr<LocalExpertExecutor>> LocalExpertExecutor::Create(
    const ModelFile& model, Backend& backend, int max_rows, int64_t piece_rows) {
  const ModelConfig& c = model.config();
  if (max_rows < 1 || piece_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expert executor of %d rows in pieces of %d", max_rows, piece_rows));
  }
  const int64_t piece = std::min<int64_t>(max_rows, piece_rows);
  // RunRouted holds a row's k experts at once in the same buffers.
  const int64_t buffer_rows = std::max<int64_t>(piece, c.n_expert_used);
  ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch scratch,
                         ExpertFfnScratch::Create(backend, c.n_ff, buffer_rows));
  std::unique_ptr<LocalExpertExecutor> ex(new LocalExpertExecutor(backend, std::move(scratch)));
  ex->max_rows_ = max_rows;
  ex->piece_rows_ = piece;
  ex->n_expert_ = c.n_expert;
  ex->n_embd_ = c.n_embd;
  // On a host backend every expert is a view of the mapped file; onto a
  // device the copy of the whole set shows its progress when it is long.
  StepProgress progress(absl::StrCat("loading the experts onto ", backend.name()),
                        static_cast<uint64_t>(c.n_moe_layer()) * c.n_expert, "experts");
  ex->n_dense_leading_ = c.n_dense_leading;
  for (int l = 0; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) {  // a dense layer: empty entries keep the [layer][expert] index
      ex->experts_.resize(ex->experts_.size() + static_cast<size_t>(c.n_expert));
      continue;
    }
    for (int e = 0; e < c.n_expert; ++e) {
      const size_t before = ex->storage_.size();
      ODMOE_ASSIGN_OR_RETURN(ExpertWeights w,
                             LoadExpertWeights(backend, model, l, e, &ex->storage_));
      ex->experts_.push_back(w);
      uint64_t copied = 0;
      if (ex->storage_.size() > before) {
        const ExpertTensors t = model.Expert(l, e);
        copied = t.gate.bytes() + t.up.bytes() + t.down.bytes();
      }
      progress.Advance(1, copied);
    }
  }
  progress.Finish();
  ex->k_ = c.n_expert_used;
  if (RoutedRunsEnabled() && !c.expert_bias &&
      c.expert_activation.kind == ExpertActivation::Kind::kSwiGlu) {
    const absl::Status st = ex->MakeTables(c);
    // Experts a table cannot hold (a layer's experts stored as separate
    // tensors of different types): every layer keeps the plan.
    if (absl::IsInvalidArgument(st)) {
      ex->tables_.clear();
    } else {
      ODMOE_RETURN_IF_ERROR(st);
    }
  }
  const size_t rows = static_cast<size_t>(max_rows);
  const size_t prows = static_cast<size_t>(buffer_rows);
  const size_t d = static_cast<size_t>(c.n_embd);
  // Layout (4-byte words): xe ye [piece * d each], zeros [rows * d], then the
  // routing of one Run: row ids and scales, up to rows * n_expert_used of each.
  ex->max_routes_ = static_cast<int64_t>(rows) * std::max(c.n_expert_used, 1);
  ODMOE_ASSIGN_OR_RETURN(
      ex->work_, backend.Allocate((2 * prows * d + rows * d +
                                   2 * static_cast<size_t>(ex->max_routes_)) *
                                  sizeof(float)));
  ex->xe_ = static_cast<float*>(ex->work_->data());
  ex->ye_ = ex->xe_ + prows * d;
  ex->zeros_ = ex->ye_ + prows * d;
  ex->routes_ = reinterpret_cast<int32_t*>(ex->zeros_ + rows * d);
  const std::vector<float> zeros(rows * d, 0.0f);
  ODMOE_RETURN_IF_ERROR(backend.CopyToBackend(ex->zeros_, zeros.data(), zeros.size() * 4));
  return ex;
}

absl::Status LocalExpertExecutor::Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) {
  if (layer < n_dense_leading_) {
    return absl::InvalidArgumentError(absl::StrFormat("layer %d has no experts", layer));
  }
  if (x.rows > max_rows_ || out.rows != x.rows || x.cols != n_embd_ || out.cols != n_embd_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expert batch of %d x %d does not fit the executor (%d x %d)", x.rows,
                        x.cols, max_rows_, n_embd_));
  }
  if (x.rows == 1 && plan.backend_weights != nullptr && plan.weights_backend == &backend_) {
    return RunOneRow(layer, x, plan, out);
  }
  // Every expert's row ids, then every expert's scales, in one upload (one
  // wait for the device per layer instead of two per expert).
  int64_t total = 0;
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    total += static_cast<int64_t>(er.rows.size());
    if (er.weights.size() != er.rows.size()) {
      return absl::InvalidArgumentError("routing plan: rows and weights differ in length");
    }
  }
  if (total > max_routes_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "routing plan of %d row assignments does not fit the executor (%d)", total, max_routes_));
  }
  host_routes_.resize(static_cast<size_t>(2 * total));
  int64_t at = 0;
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    const size_t n = er.rows.size();
    std::memcpy(host_routes_.data() + at, er.rows.data(), n * sizeof(int32_t));
    std::memcpy(host_routes_.data() + total + at, er.weights.data(), n * sizeof(float));
    at += static_cast<int64_t>(n);
  }
  ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(routes_, host_routes_.data(),
                                               host_routes_.size() * sizeof(int32_t)));
  backend_.Copy(ConstMat(zeros_, out.rows, out.cols), out);
  const float* scales = reinterpret_cast<const float*>(routes_ + total);
  at = 0;
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    const ExpertWeights& w = experts_[static_cast<size_t>(layer * n_expert_ + er.expert)];
    const int64_t n = static_cast<int64_t>(er.rows.size());
    for (int64_t begin = 0; begin < n; begin += piece_rows_) {  // each row's sum in expert order
      const int64_t m = std::min(piece_rows_, n - begin);
      const Mat xe{xe_, m, n_embd_};
      const Mat ye{ye_, m, n_embd_};
      backend_.GatherRows(x, routes_ + at + begin, xe);
      RunExpertFfn(backend_, w, xe, scratch_, ye);
      backend_.ScatterAddScaled(ye, routes_ + at + begin, scales + at + begin, out);
    }
    at += n;
  }
  return absl::OkStatus();
}

absl::Status LocalExpertExecutor::MakeTables(const ModelConfig& c) {
  std::vector<WeightRef> gate(static_cast<size_t>(n_expert_)), up(gate.size()), down(gate.size());
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) {  // an interleaved dense layer (Llama 4): no tables
      tables_.emplace_back();
      continue;
    }
    for (int e = 0; e < n_expert_; ++e) {
      const ExpertWeights& w = experts_[static_cast<size_t>(l * n_expert_ + e)];
      gate[static_cast<size_t>(e)] = w.gate;
      up[static_cast<size_t>(e)] = w.up;
      down[static_cast<size_t>(e)] = w.down;
    }
    LayerTables t;
    ODMOE_ASSIGN_OR_RETURN(t.gate, backend_.MakeWeightTable(gate));
    ODMOE_ASSIGN_OR_RETURN(t.up, backend_.MakeWeightTable(up));
    ODMOE_ASSIGN_OR_RETURN(t.down, backend_.MakeWeightTable(down));
    tables_.push_back(std::move(t));
  }
  return absl::OkStatus();
}

bool LocalExpertExecutor::CanRunRouted(const Backend& backend, int layer, int64_t rows) const {
  return &backend == &backend_ && rows == 1 && layer >= n_dense_leading_ &&
         layer - n_dense_leading_ < static_cast<int>(tables_.size()) &&
         tables_[static_cast<size_t>(layer - n_dense_leading_)].gate.size() > 0;
}

absl::Status LocalExpertExecutor::RunRouted(int layer, ConstMat x, const int32_t* ids,
                                            const float* weights, int k, Mat out) {
  if (!CanRunRouted(backend_, layer, x.rows) || k != k_ || out.rows != x.rows ||
      x.cols != n_embd_ || out.cols != n_embd_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "expert executor: no routed run of layer %d for %d x %d rows with %d experts each", layer,
        x.rows, x.cols, k));
  }
  // The rows of RunExpertFfn for each picked expert, then the canonical sum.
  const LayerTables& t = tables_[static_cast<size_t>(layer - n_dense_leading_)];
  const int64_t picked = x.rows * k;
  const Mat gate = scratch_.gate(picked);
  const Mat up = scratch_.up(picked);
  const Mat ye{ye_, picked, n_embd_};
  backend_.MatMulPairById(t.gate, t.up, ids, x, gate, up);
  backend_.SwiGluMatMulById(t.down, ids, gate, up, ye);
  backend_.CombineExperts(ye, ids, weights, k, out);
  return absl::OkStatus();
}

absl::Status LocalExpertExecutor::RunOneRow(int layer, ConstMat x, const RoutingPlan& plan,
                                            Mat out) {
  // One row: each expert reads x itself, and its scale is already on the
  // backend (plan.backend_weights); row id 0 is the first word of `zeros_`.
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    if (er.rows.size() != 1 || er.slots.size() != 1 || er.rows[0] != 0) {
      return absl::InvalidArgumentError("routing plan: a one-row batch with other rows");
    }
  }
  backend_.Copy(ConstMat(zeros_, out.rows, out.cols), out);
  const auto* row0 = reinterpret_cast<const int32_t*>(zeros_);
  const Mat ye{ye_, 1, n_embd_};
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    RunExpertFfn(backend_, experts_[static_cast<size_t>(layer * n_expert_ + er.expert)], x,
                 scratch_, ye);
    backend_.ScatterAddScaled(ye, row0, plan.backend_weights + er.slots[0], out);
  }
  return absl::OkStatus();
}

}  // namespace odmoe
