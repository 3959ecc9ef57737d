// Computes every expert in this process, on one backend (the single-process
// reference engine, and the shadow node's quantized model).
//
//   ODMOE_ASSIGN_OR_RETURN(auto experts, LocalExpertExecutor::Create(*model, *be, 64));
//   transformer->Forward(tokens, pos0, *experts, &logits);
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/expert_executor.h"
#include "engine/expert_ffn.h"
#include "model/model_file.h"

namespace odmoe {

/// Expert (layer, expert)'s weights on `backend` (views of the mapped file on
/// a host backend; copies kept in *storage on a device).
absl::StatusOr<ExpertWeights> LoadExpertWeights(
    Backend& backend, const ModelFile& model, int layer, int expert,
    std::vector<std::unique_ptr<BackendBuffer>>* storage);

/// Whether LocalExpertExecutor takes one-row layers from the routing on the
/// backend (RunRouted): yes unless ODMOE_ROUTED_EXPERTS=0 (every layer then
/// takes the plan, the same bits: for comparing the two on a device).
bool RoutedRunsEnabled();

class LocalExpertExecutor : public ExpertExecutor {
 public:
  /// Makes every expert of `model` usable on `backend` (zero-copy on host
  /// backends) with buffers for batches of up to `max_rows` rows. An expert
  /// takes its rows kExpertPieceRows at a time (each row's result is its
  /// own), so its buffers hold that many, not max_rows.
  static constexpr int64_t kExpertPieceRows = 1024;
  static absl::StatusOr<std::unique_ptr<LocalExpertExecutor>> Create(
      const ModelFile& model, Backend& backend, int max_rows,
      int64_t piece_rows = kExpertPieceRows);

  absl::Status Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) override;
  /// One row on this executor's backend, for models whose experts are plain
  /// SwiGLU without biases: the picked experts' products by ids
  /// (Backend::MatMulPairById, SwiGluMatMulById) and CombineExperts.
  bool CanRunRouted(const Backend& backend, int layer, int64_t rows) const override;
  absl::Status RunRouted(int layer, ConstMat x, const int32_t* ids, const float* weights, int k,
                         Mat out) override;

 private:
  /// A MoE layer's experts as tables of their gate, up and down weights.
  struct LayerTables {
    WeightTable gate, up, down;
  };

  /// tables_ for every MoE layer (after experts_ is filled).
  absl::Status MakeTables(const ModelConfig& c);
  /// Run for one row whose scales are on this backend (plan.backend_weights).
  absl::Status RunOneRow(int layer, ConstMat x, const RoutingPlan& plan, Mat out);

  LocalExpertExecutor(Backend& backend, ExpertFfnScratch scratch)
      : backend_(backend), scratch_(std::move(scratch)) {}

  Backend& backend_;
  int n_expert_ = 0;
  int n_dense_leading_ = 0;  // layers [0, n) have no experts
  int64_t n_embd_ = 0;
  int64_t max_rows_ = 0;    // rows of a batch
  int64_t piece_rows_ = 0;  // rows of xe / ye / the scratch: min(max_rows, kExpertPieceRows)
  std::vector<ExpertWeights> experts_;  // [layer * n_expert + e]
  std::vector<LayerTables> tables_;     // [layer - n_dense_leading]; empty: no routed runs
  int k_ = 0;                           // experts per row (RunRouted's rows of gate / up / ye)
  std::vector<std::unique_ptr<BackendBuffer>> storage_;
  ExpertFfnScratch scratch_;
  std::unique_ptr<BackendBuffer> work_;  // gathered x, expert y, zeros, row ids and scales
  float* xe_ = nullptr;
  float* ye_ = nullptr;
  float* zeros_ = nullptr;      // rows x n_embd zeros on the backend, for clearing `out`
  int32_t* routes_ = nullptr;   // a Run's row ids [total], then its scales [total]
  int64_t max_routes_ = 0;      // row assignments one Run may hold
  std::vector<int32_t> host_routes_;
};

}  // namespace odmoe
