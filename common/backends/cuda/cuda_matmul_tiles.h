// The launch shape shared by the MatMul kernels (internal; include only from
// .cu files): blocks of kMatMulThreads threads covering kMatMulRowsPerBlock
// weight rows (float weights: a half-warp per row) or kWarpRowsPerBlock rows
// (quantized weights: a warp per row, staged by StageBytes), blockIdx.y
// walking tiles of NX activation rows (each weight element is loaded once per
// tile).
//
//   WithTileRows(n, [&](auto nx) {
//     constexpr int NX = decltype(nx)::value;
//     MyKernel<T, NX><<<MatMulGrid(out, n, NX), kMatMulThreads, 0, s>>>(...);
//   });
//   // in a warp-per-row kernel: stage a stretch of the row, then read it
//   const int skew = StageBytes(buf, row + first_byte, bytes, threadIdx.x % 32);
//   __syncwarp();
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
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

inline dim3 MatMulGrid(int64_t out, int64_t n, int nx, int rows_per_block = kMatMulRowsPerBlock) {
  constexpr int64_t kMaxGridY = 65535;
  const int64_t tiles = (n + nx - 1) / nx;
  return dim3(static_cast<unsigned>((out + rows_per_block - 1) / rows_per_block),
              static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
}

// ---- Products by ids: one grid slice (blockIdx.z) per picked weight ----------

/// What slice blockIdx.z of a product reads and writes (ProductSlices): the
/// weight, the index of its activation row, its output row, and whether its
/// id was in the table (else its outputs are NaN). A plain product's one
/// slice is the weight `w` given, row 0 and `y`.
struct Slice {
  const uint8_t* w;
  int64_t x_row;
  float* y;
  bool ok;
};

__device__ __forceinline__ Slice PickSlice(const ProductSlices& s, const void* w, float* y,
                                           int64_t out) {
  if (s.table == nullptr) {
    const bool second = s.w_b != nullptr && blockIdx.z == 1;
    return {static_cast<const uint8_t*>(second ? s.w_b : w), 0, second ? s.y_b : y, true};
  }
  int64_t z = static_cast<int64_t>(blockIdx.z) + s.first;
  const void* const* table = s.table;
  if (z >= s.count) {  // a pair's second product
    z -= s.count;
    table = s.table_b;
    y = s.y_b;
  }
  const int32_t id = s.ids[z];
  const bool ok = id >= 0 && id < s.entries;
  return {static_cast<const uint8_t*>(table[ok ? id : 0]), s.shared_x ? 0 : z, y + z * out, ok};
}

/// The value a slice writes: v, or NaN for an id outside the table.
__device__ __forceinline__ float SliceValue(const Slice& s, float v) {
  return s.ok ? v : __int_as_float(0x7fc00000);
}

/// Launches fn(grid) for a product's grid `g`, its z dimension walking the
/// slices (several launches past the grid's 65535 limit, s.first moved).
template <class Fn>
void ForEachSliceLaunch(dim3 g, ProductSlices s, Fn&& fn) {
  constexpr int64_t kMaxGridZ = 65535;
  if (s.table == nullptr) {
    g.z = s.w_b != nullptr ? 2 : 1;
    fn(g, s);
    return;
  }
  const int64_t total = s.table_b != nullptr ? 2 * s.count : s.count;
  for (int64_t first = 0; first < total; first += kMaxGridZ) {
    s.first = first;
    g.z = static_cast<unsigned>(total - first < kMaxGridZ ? total - first : kMaxGridZ);
    fn(g, s);
  }
}

// ---- Quantized MatMul: one warp per weight row, the row staged in shared memory ----
//
// The quantized kernels give each weight row a whole warp: the warp copies a
// stretch of the row into its shared-memory buffer with 16-byte loads
// (coalesced, whatever the row's alignment), then its 32 threads compute the
// exact integer sums of the stretch's blocks and pass them to the thread of
// the block's lane (lane l = block % 16, kept by threads l and l + 16 alike),
// which does the canonical float steps in order. The bits are those of the
// half-warp-per-row order: only integer work moves between threads.

inline constexpr int kWarpRowsPerBlock = kMatMulThreads / 32;

/// Copies bytes [src, src + bytes) of global memory to dst + (src % 16) by
/// the 32 threads of a warp (`t` = the thread's index in it); returns the
/// offset src % 16 at which the bytes start in dst (16-byte aligned, large
/// enough for bytes + 16). Reads no byte outside the range. The caller
/// synchronizes the warp before reading dst.
__device__ __forceinline__ int StageBytes(uint8_t* __restrict__ dst,
                                          const uint8_t* __restrict__ src, int bytes, int t) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(src);
  const int skew = static_cast<int>(p & 15u);
  const uintptr_t begin = (p + 15u) & ~uintptr_t{15};
  const uintptr_t end = (p + static_cast<uintptr_t>(bytes)) & ~uintptr_t{15};
  uint8_t* d = dst + skew;
  if (begin >= end) {
    for (int i = t; i < bytes; i += 32) d[i] = src[i];
    return skew;
  }
  const int head = static_cast<int>(begin - p);
  const int tail = static_cast<int>(p + static_cast<uintptr_t>(bytes) - end);
  const int vecs = static_cast<int>((end - begin) / 16);
  const uint4* s4 = reinterpret_cast<const uint4*>(begin);
  uint4* d4 = reinterpret_cast<uint4*>(d + head);
  for (int v = t; v < vecs; v += 32) d4[v] = __ldg(s4 + v);
  if (t < head) d[t] = src[t];
  if (t < tail) d[head + 16 * vecs + t] = src[head + 16 * vecs + t];
  return skew;
}

}  // namespace odmoe::cuda
