// What the CUDA backend's kernels need of a weight (internal; the backend's
// .cpp files): its type among those they compute, and the alignment of its
// address.
//
//   if (!CudaSupportsWeightType(view.type)) return InvalidArgumentError(...);
//   if (!WeightAligned(w.type, w.data)) ...   // refused at the op
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_numerics_dequant.h"
#include "tensor/dtype.h"

namespace odmoe::cuda {

/// The weight types the kernels of cuda_matmul*.cu and cuda_ops.cu handle:
/// the float types, every block32 type and the K family.
inline bool CudaSupportsWeightType(DType type) { return cuda_numerics::CudaKernelType(type); }

/// The address alignment the kernels need for rows of `type`: F32 weights are
/// read as floats, MXFP4 (17-byte blocks) byte by byte, every other type in
/// 16-bit words (each of its block sizes and field offsets is even, so every
/// block of an even-aligned row is too).
inline size_t WeightAlignment(DType type) {
  if (type == DType::kF32) return 4;
  if (type == DType::kMXFP4) return 1;
  return 2;
}

inline bool WeightAligned(DType type, const void* data) {
  return reinterpret_cast<uintptr_t>(data) % WeightAlignment(type) == 0;
}

}  // namespace odmoe::cuda
