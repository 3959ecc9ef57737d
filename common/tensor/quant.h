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
