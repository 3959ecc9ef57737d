// The launch shape shared by the MatMul kernels (internal; include only from
// .cu files): one half-warp per weight row, a block of kMatMulThreads threads
// covering kMatMulRowsPerBlock weight rows, blockIdx.y walking tiles of NX
// activation rows (each weight element is loaded once per tile).
//
//   WithTileRows(n, [&](auto nx) {
//     constexpr int NX = decltype(nx)::value;
//     MyKernel<T, NX><<<MatMulGrid(out, n, NX), kMatMulThreads, 0, s>>>(...);
//   });
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda_numerics.h"

namespace odmoe::cuda {

inline constexpr int kMatMulThreads = 256;
inline constexpr int kMatMulRowsPerBlock = kMatMulThreads / cuda_numerics::kLanes;

/// Activation rows per tile: enough to reuse each weight load, few enough
/// that the accumulators stay in registers. Calls f(integral_constant<NX>).
template <class F>
void WithTileRows(int64_t n, F&& f) {
  if (n >= 8) {
    f(std::integral_constant<int, 8>{});
  } else if (n >= 4) {
    f(std::integral_constant<int, 4>{});
  } else if (n >= 2) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

inline dim3 MatMulGrid(int64_t out, int64_t n, int nx) {
  constexpr int64_t kMaxGridY = 65535;
  const int64_t tiles = (n + nx - 1) / nx;
  return dim3(static_cast<unsigned>((out + kMatMulRowsPerBlock - 1) / kMatMulRowsPerBlock),
              static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
}

}  // namespace odmoe::cuda
