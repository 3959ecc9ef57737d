// The SwiGLU feed-forward of one expert on a batch of rows:
//   y = down( silu(gate x) * (up x) )
// or, with biases and another activation where the architecture has them
// (ExpertWeights): y = down( act(gate x + bg, up x + bu) ) + bd.
// This is the unit of work of a worker node, and of the single-process engine
// for each selected expert.
//
//   ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch s, ExpertFfnScratch::Create(be, n_ff, 64));
//   RunExpertFfn(be, weights, x, s, y);   // x, y: [n, n_embd], n <= 64
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "model/expert_pack.h"

namespace odmoe {

/// Intermediate buffers for up to `max_rows` rows ([max_rows, n_ff] twice).
class ExpertFfnScratch {
 public:
  static absl::StatusOr<ExpertFfnScratch> Create(Backend& backend, int64_t n_ff, int64_t max_rows);
  int64_t max_rows() const { return max_rows_; }
  Mat gate(int64_t rows) const { return {gate_, rows, n_ff_}; }
  Mat up(int64_t rows) const { return {up_, rows, n_ff_}; }

 private:
  std::unique_ptr<BackendBuffer> buffer_;
  float* gate_ = nullptr;
  float* up_ = nullptr;
  int64_t n_ff_ = 0;
  int64_t max_rows_ = 0;
};

/// y = expert(x) for x.rows <= scratch.max_rows(). y must not alias x.
void RunExpertFfn(Backend& backend, const ExpertWeights& w, ConstMat x,
                  const ExpertFfnScratch& scratch, Mat y);

/// RunExpertFfn in the three stages of a streamed load (FIRM's sub-expert
/// units), each reading one matrix: kGate (gate x + bg), kUp (up x + bu and
/// the activation, into scratch.gate), kDown (y = down h + bd). Running the
/// three in order is RunExpertFfn, bit for bit.
enum class ExpertFfnStage { kGate = 0, kUp = 1, kDown = 2 };
inline constexpr int kExpertFfnStages = 3;
void RunExpertFfnStage(Backend& backend, ExpertFfnStage stage, const ExpertWeights& w, ConstMat x,
                       const ExpertFfnScratch& scratch, Mat y);

}  // namespace odmoe
