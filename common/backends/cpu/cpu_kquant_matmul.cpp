// MatMul with K-family weights (Q2_K .. Q6_K, IQ4_XS): Q8_K activations and
// the canonical K-family dot of cpu_backend.h.
#include <cassert>

#include "cpu_ops.h"

namespace odmoe {

void CpuKQuantMatMul(const CpuOpContext& ctx, const WeightRef& w, ConstMat x, Mat y) {
  assert(false && "CpuKQuantMatMul: not implemented yet (CpuSupportsWeightType refuses K types)");
}

}  // namespace odmoe
