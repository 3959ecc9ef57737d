#include "engine/expert_ffn.h"

#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<ExpertFfnScratch> ExpertFfnScratch::Create(Backend& backend, int64_t n_ff,
                                                          int64_t max_rows) {
  ExpertFfnScratch s;
  ODMOE_ASSIGN_OR_RETURN(
      s.buffer_, backend.Allocate(2 * static_cast<size_t>(n_ff * max_rows) * sizeof(float)));
  s.gate_ = static_cast<float*>(s.buffer_->data());
  s.up_ = s.gate_ + n_ff * max_rows;
  s.n_ff_ = n_ff;
  s.max_rows_ = max_rows;
  return s;
}

namespace {

/// gate = act(gate, up) in place (the expert's activation).
void Activate(Backend& backend, const ExpertWeights& w, Mat gate, Mat up) {
  switch (w.activation.kind) {
    case ExpertActivation::Kind::kSwiGlu:
      backend.SwiGlu(gate, up, gate);
      break;
    case ExpertActivation::Kind::kSwiGluOai:
      backend.SwiGluOai(gate, up, w.activation.alpha, w.activation.limit, gate);
      break;
    case ExpertActivation::Kind::kGeGlu:
      backend.GeGlu(gate, up, gate);
      break;
  }
}

}  // namespace

void RunExpertFfnStage(Backend& backend, ExpertFfnStage stage, const ExpertWeights& w, ConstMat x,
                       const ExpertFfnScratch& scratch, Mat y) {
  const Mat gate = scratch.gate(x.rows);
  const Mat up = scratch.up(x.rows);
  switch (stage) {
    case ExpertFfnStage::kGate:
      backend.MatMul(w.gate, x, gate);
      if (w.gate_bias != nullptr) backend.AddBias(gate, w.gate_bias);
      return;
    case ExpertFfnStage::kUp:
      backend.MatMul(w.up, x, up);
      if (w.up_bias != nullptr) backend.AddBias(up, w.up_bias);
      Activate(backend, w, gate, up);
      return;
    case ExpertFfnStage::kDown:
      backend.MatMul(w.down, gate, y);
      if (w.down_bias != nullptr) backend.AddBias(y, w.down_bias);
      return;
  }
}

void RunExpertFfn(Backend& backend, const ExpertWeights& w, ConstMat x,
                  const ExpertFfnScratch& scratch, Mat y) {
  // The gate and up stages as one pair of products (x quantized once where
  // the backend can share it), the activation fused with the down product
  // where the backend can; every element gets the stages' operations.
  const Mat gate = scratch.gate(x.rows);
  const Mat up = scratch.up(x.rows);
  backend.MatMulPair(w.gate, w.up, x, gate, up);
  if (w.gate_bias != nullptr) backend.AddBias(gate, w.gate_bias);
  if (w.up_bias != nullptr) backend.AddBias(up, w.up_bias);
  if (w.activation.kind == ExpertActivation::Kind::kSwiGlu) {
    backend.SwiGluMatMul(w.down, gate, up, y);  // the activation and the down product
    if (w.down_bias != nullptr) backend.AddBias(y, w.down_bias);
    return;
  }
  Activate(backend, w, gate, up);
  RunExpertFfnStage(backend, ExpertFfnStage::kDown, w, x, scratch, y);
}

}  // namespace odmoe
