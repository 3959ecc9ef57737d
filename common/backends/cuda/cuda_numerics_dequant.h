// Dequantization of one stored element of any weight type, on the device and
// on the host, exactly as tensor/quant.h's DequantizeRow (GetRows, and the
// F32 weight chunks of the cuBLAS path); the set of weight types the kernels
// compute with, and the one dispatch from a runtime DType to a template
// argument (the kernels' launchers and the host tests use it).
//
//   float v = cuda_numerics::DequantElement<DType::kQ4_K>(row, i);
//   // bit-equal to DequantizeRow(DType::kQ4_K, row, out, n), out[i]
//   VisitWeightType(type, [&](auto tag) {
//     constexpr DType T = decltype(tag)::value;
//     if constexpr (IsKFamily(T)) KKernel<T><<<...>>>(...);
//   });
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

/// A weight type as a compile-time value, for VisitWeightType.
template <DType T>
struct TypeTag {
  static constexpr DType value = T;
};

/// Calls f(TypeTag<T>{}) for the weight type `type` and returns true, or
/// returns false for a type the kernels do not compute with (CudaKernelType).
template <class F>
bool VisitWeightType(DType type, F&& f) {
  switch (type) {
#define ODMOE_VISIT(T) \
  case T:              \
    f(TypeTag<T>{});   \
    return true;
    ODMOE_VISIT(DType::kF32)
    ODMOE_VISIT(DType::kF16)
    ODMOE_VISIT(DType::kBF16)
    ODMOE_VISIT(DType::kQ8_0)
    ODMOE_VISIT(DType::kQ4_0)
    ODMOE_VISIT(DType::kQ4_1)
    ODMOE_VISIT(DType::kQ5_0)
    ODMOE_VISIT(DType::kQ5_1)
    ODMOE_VISIT(DType::kIQ4_NL)
    ODMOE_VISIT(DType::kMXFP4)
    ODMOE_VISIT(DType::kQ2_K)
    ODMOE_VISIT(DType::kQ3_K)
    ODMOE_VISIT(DType::kQ4_K)
    ODMOE_VISIT(DType::kQ5_K)
    ODMOE_VISIT(DType::kQ6_K)
    ODMOE_VISIT(DType::kIQ4_XS)
#undef ODMOE_VISIT
    default:
      return false;
  }
}

}  // namespace odmoe::cuda_numerics
