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
//   Q4_1 / Q5_1: d = (max - min) / 15 (/ 31), m = min,
//         q = (int)((x - min) / d + 0.5), capped at 15 (31)
//   Q5_0: m as Q4_0, d = m / -16, q = min(31, (int)(x / d + 16.5))
//   MXFP4: e = floor(log2(max|x|)) - 2 + 127 (0 for a zero block), each q the
//         index of the E8M0Half(e) * kMxfp4Values entry nearest to x (the
//         first on a tie)
//   IQ4_NL (no importance weights): per block, with w_i = x_i^2, the scale
//         d = sum w q x / sum w q^2 (q = the kIq4nlValues entry nearest to
//         x / d') best in sum w q x * d over d' = max / 127 (max: the x of
//         largest |x|, sign kept) and d' = max / (t - 127), t = -7..7; then
//         q = the entry nearest to x / d. Blocks with max|x| < 1e-15: d = 0.
// In all of them "x / d" is x * (1 / d) in f32, the codes use the f32 scale
// and the block stores its f16 rounding (round to nearest even). The
// dequantizers compute the f32 expression of tensor/quant_blocks.h with one
// rounding per operation (Q4_1 / Q5_1: (d * q) + m, two roundings).
// Non-finite input never reaches an undefined conversion (codes are clamped
// before the float-to-int step); what such blocks hold is unspecified.
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
//
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS quantization is llama.cpp's
// reference quantizer without importance matrix (quantize_row_<type>_ref,
// what llama-quantize does without --imatrix), byte for byte: the same
// sub-block fits, float operations in the same order (no FMA), round half to
// even, f16 round to nearest even (tests/gguf/quant_kfamily_test.cpp checks
// llama.cpp's own output). Non-finite input gives defined (unspecified)
// bytes. tensor/quant_k_quantize.cpp describes each fit.
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
