// Where the experts of a MoE layer are computed. The transformer calls an
// ExpertExecutor once per layer; the single-process engine computes the
// experts locally (LocalExpertExecutor), the cluster's main node sends them
// to worker nodes. Both must give bit-identical results, which is why the
// combination order is fixed here:
//
//   out[t] = 0;  for each expert e selected by row t, in ascending id order:
//                  out[t] += weight(t, e) * expert_e(x[t])
//
// implemented as one Backend::ScatterAddScaled per expert, experts taken in
// ascending id order (see RoutingPlan), or, where the routing stays on the
// backend (RunRouted), as Backend::CombineExperts, which adds in that order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "backend/backend.h"

namespace odmoe {

/// The routing of a batch of rows at one layer, regrouped by expert.
struct RoutingPlan {
  struct ExpertRows {
    int32_t expert = 0;
    std::vector<int32_t> rows;   // rows of the batch routed to this expert, ascending
    std::vector<float> weights;  // routing weight of each of those rows
    std::vector<int32_t> slots;  // where each weight sits in the [n, k] arrays: t * k + j
  };
  std::vector<ExpertRows> experts;  // only experts with rows, ascending id

  /// The same [n, k] weights in the memory of `weights_backend`, when the
  /// caller has them there (the transformer: RouterTopK's output); null
  /// otherwise. A local executor on that backend reads a one-row batch's
  /// scales there instead of uploading them (one wait for the device less
  /// per layer).
  const float* backend_weights = nullptr;
  const Backend* weights_backend = nullptr;

  /// Builds the plan from per-row top-k ids and weights (row-major [n, k]).
  /// INVALID_ARGUMENT for an expert id outside [0, n_expert) or a repeated
  /// id within a row.
  static absl::StatusOr<RoutingPlan> Build(std::span<const int32_t> ids,
                                           std::span<const float> weights, int k, int n_expert);
};

class ExpertExecutor {
 public:
  virtual ~ExpertExecutor() = default;
  /// Computes the MoE output of `layer` for rows `x` (the ffn-normed hidden
  /// states, backend memory) into `out` (same shape, overwritten), combining
  /// in the canonical order above.
  virtual absl::Status Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) = 0;

  /// Whether RunRouted can compute `layer` for a batch of `rows` rows on
  /// `backend` from routing left in that backend's memory (no plan on the
  /// host, so a device never waits for the host in the middle of a step).
  /// False here: executors that send rows elsewhere or read the plan (the
  /// cluster's, the shadow's) take Run.
  virtual bool CanRunRouted(const Backend& backend, int layer, int64_t rows) const {
    (void)backend, (void)layer, (void)rows;
    return false;
  }
  /// The MoE output of `layer` from RouterTopK's [x.rows, k] ids and weights
  /// in backend memory: the bits Run gives with the plan built from them
  /// (the same canonical combination). Called only where CanRunRouted said
  /// true; FAILED_PRECONDITION otherwise.
  virtual absl::Status RunRouted(int layer, ConstMat x, const int32_t* ids, const float* weights,
                                 int k, Mat out) {
    (void)layer, (void)x, (void)ids, (void)weights, (void)k, (void)out;
    return absl::FailedPreconditionError("this expert executor takes its routing as a plan");
  }
};

}  // namespace odmoe
