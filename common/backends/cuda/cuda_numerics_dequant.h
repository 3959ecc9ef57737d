// Dequantization of one stored element of any weight type, on the device and
// on the host, exactly as tensor/quant.h's DequantizeRow (GetRows, and the
// F32 weight chunks of the cuBLAS path).
//
//   float v = cuda_numerics::DequantElement<DType::kQ4_K>(row, i);
//   // bit-equal to DequantizeRow(DType::kQ4_K, row, out, n), out[i]
#pragma once

#include "cuda_numerics.h"
#include "cuda_numerics_block32.h"
#include "cuda_numerics_kquant.h"

namespace odmoe::cuda_numerics {

/// Element i of a stored row of type T (float, block32 or K family).
template <DType T>
ODMOE_HD float DequantElement(const uint8_t* row, int64_t i) {
  if constexpr (IsBlock32(T)) {
    return Block32Element<T>(row, i);
  } else if constexpr (IsKFamily(T)) {
    return KElement<T>(row, i);
  } else {
    return LoadFloat<T>(row, i);
  }
}

/// The weight types the CUDA kernels compute with: the float types, every
/// block32 type and the K family (not Q8_K, an activation type only).
ODMOE_HD constexpr bool CudaKernelType(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || IsBlock32(t) || IsKFamily(t);
}

}  // namespace odmoe::cuda_numerics
