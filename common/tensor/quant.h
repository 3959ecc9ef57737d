// Portable (scalar) conversion of rows between F32 and every stored type.
//
// These functions are the reference the SIMD kernels are tested against, and
// what the quantizer and test fixtures use to write files:
//
//   std::vector<uint8_t> row(RowBytes(DType::kQ4_0, n));
//   QuantizeRow(DType::kQ4_0, src.data(), row.data(), n);
//   DequantizeRow(DType::kQ4_0, row.data(), back.data(), n);
//
// Quantization follows the reference rules of the GGUF ecosystem:
//   Q8_0: d = max|x| / 127, q = round(x / d)            (round half away from 0)
//   Q4_0: m = the x with the largest |x| (sign kept), d = m / -8,
//         q = min(15, (int)(x / d + 8.5))
//
// K family (256-element super-blocks; tensor/quant_k_scales.h and
// tensor/quant_k_codes.h unpack the scales and codes). Dequantization, bit
// for bit the gguf package's (each product one rounded f32 multiply, d and
// dmin the block's F16ToF32 values, sc / mn the sub-block's integer scale
// and min, q the code):
//   Q2_K, Q4_K, Q5_K: (d * sc) * q - dmin * mn
//   Q3_K, Q6_K:       (d * sc) * q          (sc signed, q signed)
//   IQ4_XS:           (d * sc) * kIq4nlValues[q]
//   Q8_K:             d * q                 (d an f32)
//
// Q8_K quantization (the activations of every K-family MatMul; part of the
// numerics contract, the GGUF ecosystem's rule):
//   amax = the largest |x| (NaN skipped), max = the x with that magnitude,
//   sign kept (the first one wins). amax == 0: d = 0, all codes and bsums 0.
//   Otherwise iscale = -127 / max (f32 division), d = 1 / iscale,
//   q_i = min(127, round-half-to-even(iscale * x_i)) (in [-127, 127] for
//   finite x; a NaN product gives 127, a product <= -127.5 gives -127),
//   bsums[j] = the sum of q_{16j} .. q_{16j+15}.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace odmoe {

/// Converts `n` elements of `type` at `src` to float. n must be a whole number
/// of blocks.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

/// Converts `n` floats to `type` at `dst` (RowBytes(type, n) bytes).
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace odmoe
