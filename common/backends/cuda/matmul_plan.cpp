#include "matmul_plan.h"

#include <algorithm>
#include <climits>

namespace odmoe {

size_t QuantizedActivationBytes(int64_t n, int64_t k) {
  const size_t blocks = static_cast<size_t>(n) * static_cast<size_t>(k / 32);
  return blocks * (32 + sizeof(float));
}

size_t QuantizedKActivationBytes(int64_t n, int64_t k) {
  return static_cast<size_t>(n) * static_cast<size_t>(k / kSuperBlockElems) * kQ8KActBytes;
}

MatMulPlan PlanMatMul(DType type, int64_t out, int64_t k, int64_t n, FloatMatMulPolicy policy) {
  MatMulPlan p;
  if (Traits(type).vec_dot == DType::kQ8_0) {
    p.path = MatMulPath::kQuantized;
    p.scratch_bytes = QuantizedActivationBytes(n, k);
    return p;
  }
  if (Traits(type).vec_dot == DType::kQ8_K) {
    p.path = MatMulPath::kQuantizedK;
    p.scratch_bytes = QuantizedKActivationBytes(n, k);
    return p;
  }
  const bool fits_int = out <= INT_MAX && k <= INT_MAX && n <= INT_MAX;
  if (policy != FloatMatMulPolicy::kCublas || n < kCublasMinRows || !fits_int) {
    p.path = MatMulPath::kFloatCanonical;
    return p;
  }
  if (type == DType::kF32) {
    p.path = MatMulPath::kCublasF32;
    return p;
  }
  p.path = MatMulPath::kCublasDequantized;
  const int64_t row_bytes = k * static_cast<int64_t>(sizeof(float));
  p.chunk_rows = std::clamp<int64_t>(static_cast<int64_t>(kDequantChunkBytes) / row_bytes, 1, out);
  p.scratch_bytes = static_cast<size_t>(p.chunk_rows * row_bytes);
  return p;
}

}  // namespace odmoe
