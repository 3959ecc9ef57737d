// Which kernel a CUDA MatMul uses, and the scratch memory it needs (plain
// C++: the decision is tested without a GPU).
//
//   MatMulPlan p = PlanMatMul(DType::kF16, /*out=*/4096, /*k=*/4096, /*n=*/512,
//                             FloatMatMulPolicy::kCublas);
//   // p.path == MatMulPath::kCublasDequantized, p.chunk_rows weight rows per
//   // dequantize-and-GEMM step, p.scratch_bytes of scratch.
//
// The paths:
//   kQuantized          block32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
//                       MXFP4): activations quantized to Q8_0 (scratch: codes
//                       and scales), exact integer block dots.
//   kQuantizedK         K-family weights (Q2_K .. Q6_K, IQ4_XS): activations
//                       quantized to Q8_K (scratch: kQ8KActBytes per
//                       super-block), exact integer super-block sums.
//   kFloatCanonical     F32 / F16 / BF16 weights in the canonical order.
//   kCublasF32          cublasSgemm straight on the F32 weight.
//   kCublasDequantized  F16 / BF16 weights: chunks of weight rows widened to
//                       F32 in scratch (exactly), then cublasSgemm per chunk.
//                       cuBLAS has no F16-weight x F32-activation product, and
//                       rounding the activations to F16 would lose ~1e-3
//                       relative, far outside the op tests' tolerance.
// cuBLAS is only chosen under FloatMatMulPolicy::kCublas, from kCublasMinRows
// activation rows on (below, the canonical kernel streams the weight once and
// is as fast), and when every dimension fits cuBLAS's 32-bit int.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_backend_options.h"
#include "tensor/dtype.h"

namespace odmoe {

enum class MatMulPath { kQuantized, kQuantizedK, kFloatCanonical, kCublasF32, kCublasDequantized };

struct MatMulPlan {
  MatMulPath path = MatMulPath::kFloatCanonical;
  int64_t chunk_rows = 0;    // kCublasDequantized: weight rows per chunk
  size_t scratch_bytes = 0;  // device scratch the path needs
};

/// Activation rows from which kCublas hands float-weight products to cuBLAS.
inline constexpr int64_t kCublasMinRows = 32;
/// Upper bound on the F32 scratch of one kCublasDequantized chunk.
inline constexpr size_t kDequantChunkBytes = size_t{32} << 20;

/// Bytes of quantized activations for n rows of k elements (k % 32 == 0):
/// per 32-element block, 32 codes and one float scale.
size_t QuantizedActivationBytes(int64_t n, int64_t k);

/// Device bytes of one quantized activation super-block (Q8_K: 256 codes,
/// 16 sums, the scale, padded to 16 bytes; cuda_numerics::QActSuperBlock).
inline constexpr size_t kQ8KActBytes = 336;

/// Bytes of Q8_K activations for n rows of k elements (k % 256 == 0).
size_t QuantizedKActivationBytes(int64_t n, int64_t k);

/// The paths whose activations are quantized into scratch first.
inline bool QuantizedPath(MatMulPath path) {
  return path == MatMulPath::kQuantized || path == MatMulPath::kQuantizedK;
}

/// The path for y[n, out] = x[n, k] * w^T with weights of `type`.
MatMulPlan PlanMatMul(DType type, int64_t out, int64_t k, int64_t n, FloatMatMulPolicy policy);

}  // namespace odmoe
