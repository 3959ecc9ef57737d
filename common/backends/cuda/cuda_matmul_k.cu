// MatMul with K-family weights (Q2_K .. Q6_K, IQ4_XS) in the canonical order
// of cpu_backend.h (steps A-D): activation rows are quantized to Q8_K on the
// device (one warp per super-block), then one warp per weight row, lane l
// taking super-blocks l, l + 16, ... (exact int32 sums, then the fma step),
// reduced by the fixed tree. Two kernels share that order:
// - KMatVecKernel (fewer than 8 activation rows, the row start aligned to
//   KVecAlign): four threads per super-block, eight super-blocks per step,
//   each thread reading its quarter's code bytes and activation words straight
//   from global memory with 16-, 8- or 4-byte loads (2-byte aligned types
//   shift words out of 16-byte lines) and adding its exact int32 part to its
//   three neighbours' by shuffles;
// - KMatMulKernel (prefill, or rows at other alignments): the row staged in
//   shared memory (cuda_matmul_tiles.h), each super-block split between two
//   threads, tiles of NX activation rows sharing each decoded super-block.
// Every output element is the same chain of operations whatever NX, the
// kernel or the grid.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "cuda_matmul_tiles.h"
#include "cuda_quantize_warp.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

constexpr int kQuantizeThreads = 128;

/// One warp per super-block.
template <class Src>
__global__ void __launch_bounds__(kQuantizeThreads)
    QuantizeQ8KKernel(Src src, int64_t total, QActSuperBlock* __restrict__ xq) {
  AfterPriorKernels();
  const int l = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = GridThreads() / 32;
  for (int64_t s = GlobalThread() / 32; s < total; s += warps) {
    QuantizeSuperBlockWarp(src, s, &xq[s], l);
  }
}

template <DType T>
ODMOE_HD constexpr int KStageVecs() {
  return (num::kLanes * num::KFormatOf<T>().bytes + 31) / 16;
}

/// Lane accumulators of one weight row `wr` against NX activation rows
/// (xq + r * x_stride, r < nt), computed by one warp (`t` = the thread's
/// index in it) through its staging buffer `buf`. The row is staged 16
/// super-blocks at a time; super-block s0 + l of a stretch is lane l's
/// (l = t % 16): thread l sums its first half of sub-blocks, thread l + 16
/// the second, the two exact int32 parts are added, and both threads take
/// the float step, so both hold lane l's accumulator and the half-warp tree
/// of either half gives the row's dot.
template <DType T, int NX>
__device__ __forceinline__ void KRowLanes(const uint8_t* __restrict__ wr, uint8_t* buf,
                                          const QActSuperBlock* xq, int64_t x_stride,
                                          int64_t n_super, int nt, int t, float* acc) {
  constexpr num::KFormat F = num::KFormatOf<T>();
  constexpr int kHalf = kSuperBlockElems / F.sub_elems / 2;
  const int lane = t % num::kLanes;
  const int half = t / num::kLanes;
#pragma unroll
  for (int r = 0; r < NX; ++r) acc[r] = 0.0f;
  for (int64_t s0 = 0; s0 < n_super; s0 += num::kLanes) {
    const int units = static_cast<int>(n_super - s0 < num::kLanes ? n_super - s0 : num::kLanes);
    const int skew = StageBytes(buf, wr + s0 * F.bytes, units * F.bytes, t);
    __syncwarp();
    const bool mine = lane < units;
    const uint8_t* sb = buf + skew + lane * F.bytes;
    const QActSuperBlock* xs = xq + s0 + lane;
    int32_t a[NX], b[NX];
    if (mine) {
      num::KSuperBlockSumsPart<T, NX, kHalf>(sb, xs, x_stride, nt, half * kHalf, a, b);
    } else {
#pragma unroll
      for (int r = 0; r < NX; ++r) a[r] = b[r] = 0;
    }
#pragma unroll
    for (int r = 0; r < NX; ++r) {
      a[r] += __shfl_xor_sync(kFullMask, a[r], num::kLanes);
      if constexpr (F.dmin_offset >= 0) b[r] += __shfl_xor_sync(kFullMask, b[r], num::kLanes);
    }
    if (mine) {
#pragma unroll
      for (int r = 0; r < NX; ++r) {
        if (r < nt) acc[r] = num::KStep<T>(sb, xs[r * x_stride].d, a[r], b[r], acc[r]);
      }
    }
    __syncwarp();
  }
}

/// One warp per weight row (kWarpRowsPerBlock rows per block), blockIdx.y
/// walking tiles of NX activation rows quantized beforehand.
template <DType T, int NX>
__global__ void __launch_bounds__(kMatMulThreads)
    KMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t n_super,
                  const QActSuperBlock* __restrict__ xq, int64_t n, float* __restrict__ y,
                  ProductSlices slices) {
  AfterPriorKernels();
  __shared__ uint4 stage[kWarpRowsPerBlock][KStageVecs<T>()];
  const Slice sl = PickSlice(slices, w, y, out);
  xq += sl.x_row * n_super;
  y = sl.y;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int t = static_cast<int>(threadIdx.x % 32);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + warp;
  const bool row_ok = o < out;
  const uint8_t* wr = sl.w + (row_ok ? o : 0) * row_bytes;  // idle warps read row 0
  uint8_t* buf = reinterpret_cast<uint8_t*>(stage[warp]);
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * NX; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * NX) {
    const int nt = static_cast<int>(n - t0 < NX ? n - t0 : NX);
    float acc[NX];
    KRowLanes<T, NX>(wr, buf, xq + t0 * n_super, n_super, n_super, nt, t, acc);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
      const float v = HalfWarpTree(acc[r]);
      if (t == 0 && row_ok && r < nt) y[(t0 + r) * out + o] = SliceValue(sl, v);
    }
  }
}

/// Threads per block of KMatVecKernel: a warp per weight row.
constexpr int kVecThreads = 128;
constexpr int kVecRowsPerBlock = kVecThreads / 32;

/// The exact int32 sum over the four threads of a super-block (t, t ^ 1,
/// t ^ 2, t ^ 3): every one of them ends with it.
__device__ __forceinline__ int32_t QuadSum(int32_t v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  v += __shfl_xor_sync(kFullMask, v, 2);
  return v;
}

/// One warp per weight row, NX (1, 2 or 4) activation rows per tile.
/// Thread t takes quarter t % 4 of super-block s0 + t / 4 (lane (t / 4) of
/// the canonical order) and of super-block s0 + 8 + t / 4 (lane 8 + t / 4)
/// for s0 = 0, 16, ...: each lane's super-blocks arrive in their order, so
/// the four threads of a super-block hold its lane's accumulator alike; the
/// 16 lanes are gathered into half-warp order for the tree. Out-of-range
/// super-blocks read an in-range one and add nothing, so the loads of both
/// halves of a step are issued together.
template <DType T, int NX>
__global__ void __launch_bounds__(kVecThreads)
    KMatVecKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t n_super,
                  const QActSuperBlock* __restrict__ xq, int64_t n, float* __restrict__ y,
                  ProductSlices slices) {
  AfterPriorKernels();
  constexpr num::KFormat F = num::KFormatOf<T>();
  const int t = static_cast<int>(threadIdx.x % 32);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kVecRowsPerBlock + threadIdx.x / 32;
  if (o >= out) return;  // the whole warp leaves together
  const Slice sl = PickSlice(slices, w, y, out);
  xq += sl.x_row * n_super;
  y = sl.y;
  const uint8_t* wr = sl.w + o * row_bytes;
  const int g = t / 4, q = t % 4;
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * NX; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * NX) {
    const int nt = static_cast<int>(n - t0 < NX ? n - t0 : NX);
    const QActSuperBlock* xr = xq + t0 * n_super;
    float acc_lo[NX], acc_hi[NX];
#pragma unroll
    for (int r = 0; r < NX; ++r) acc_lo[r] = acc_hi[r] = 0.0f;
    for (int64_t s0 = 0; s0 < n_super; s0 += 16) {
      const bool lo_ok = s0 + g < n_super, hi_ok = s0 + 8 + g < n_super;
      const int64_t s_lo = lo_ok ? s0 + g : s0, s_hi = hi_ok ? s0 + 8 + g : s0;
      int32_t a_lo[NX], b_lo[NX], a_hi[NX], b_hi[NX];
      num::KQuarterSums<T, NX>(wr + s_lo * F.bytes, q, xr + s_lo, n_super, nt, a_lo, b_lo);
      num::KQuarterSums<T, NX>(wr + s_hi * F.bytes, q, xr + s_hi, n_super, nt, a_hi, b_hi);
#pragma unroll
      for (int r = 0; r < NX; ++r) {
        a_lo[r] = QuadSum(a_lo[r]);
        a_hi[r] = QuadSum(a_hi[r]);
        if constexpr (F.dmin_offset >= 0) {
          b_lo[r] = QuadSum(b_lo[r]);
          b_hi[r] = QuadSum(b_hi[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < NX; ++r) {
        if (r >= nt) break;
        if (lo_ok) {
          acc_lo[r] = num::KStep<T>(wr + s_lo * F.bytes, xr[r * n_super + s_lo].d, a_lo[r], b_lo[r],
                                    acc_lo[r]);
        }
        if (hi_ok) {
          acc_hi[r] = num::KStep<T>(wr + s_hi * F.bytes, xr[r * n_super + s_hi].d, a_hi[r], b_hi[r],
                                    acc_hi[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NX; ++r) {
      // Lane l < 8 is held by thread 4l's acc_lo, lane 8 + l by its acc_hi.
      const float v_lo = __shfl_sync(kFullMask, acc_lo[r], 4 * (t % 8));
      const float v_hi = __shfl_sync(kFullMask, acc_hi[r], 4 * (t % 8));
      const float v = HalfWarpTree(t % 16 < 8 ? v_lo : v_hi);
      if (t == 0 && r < nt) y[(t0 + r) * out + o] = SliceValue(sl, v);
    }
  }
}

/// Activation rows per tile of KMatVecKernel for a call of n < 8 rows.
template <class Fn>
void WithVecRows(int64_t n, Fn&& f) {
  if (n >= 4) {
    f(std::integral_constant<int, 4>{});
  } else if (n >= 2) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

/// Calls below this many activation rows go to KMatVecKernel (when aligned).
constexpr int64_t kVecMaxRows = 8;

}  // namespace

cudaError_t LaunchQuantizeQ8_K(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActSuperBlock* xq) {
  const int64_t total = n * (k / kSuperBlockElems);
  if (total == 0) return cudaSuccess;
  Launch(QuantizeQ8KKernel<PlainRows>, GridFor(total * 32, kQuantizeThreads), kQuantizeThreads, 0,
         stream, PlainRows{x}, total, xq);
  return cudaGetLastError();
}

cudaError_t LaunchQuantizeQ8_KSwiGlu(cudaStream_t stream, float* gate, const float* up, int64_t n,
                                     int64_t k, QActSuperBlock* xq) {
  const int64_t total = n * (k / kSuperBlockElems);
  if (total == 0) return cudaSuccess;
  Launch(QuantizeQ8KKernel<SwiGluRows>, GridFor(total * 32, kQuantizeThreads), kQuantizeThreads, 0,
         stream, SwiGluRows{gate, up}, total, xq);
  return cudaGetLastError();
}

cudaError_t LaunchKQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                               int64_t k, const QActSuperBlock* xq, int64_t n, float* y,
                               const ProductSlices& slices) {
  if (n == 0 || out == 0 || slices.count == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (num::IsKFamily(T)) {
      const auto* wb = static_cast<const uint8_t*>(w);
      const auto row_bytes = static_cast<int64_t>(RowBytes(T, k));
      const int64_t n_super = k / kSuperBlockElems;
      // 2-byte aligned types read the 16-byte lines around their runs: the
      // weight must start on one (its first run would reach before it).
      constexpr int kBaseAlign = num::KVecAlign<T>() == 2 ? 16 : num::KVecAlign<T>();
      const auto at = [&](const void* p) {
        return reinterpret_cast<uintptr_t>(p) % kBaseAlign == 0;
      };
      const bool aligned = slices.table != nullptr
                               ? slices.align % kBaseAlign == 0
                               : at(w) && (slices.w_b == nullptr || at(slices.w_b));
      if (n < kVecMaxRows && aligned) {
        WithVecRows(n, [&](auto nx) {
          constexpr int NX = decltype(nx)::value;
          const int64_t tiles = (n + NX - 1) / NX;
          const dim3 grid(static_cast<unsigned>((out + kVecRowsPerBlock - 1) / kVecRowsPerBlock),
                          static_cast<unsigned>(tiles));
          ForEachSliceLaunch(grid, slices, [&](dim3 g, const ProductSlices& s) {
            Launch(KMatVecKernel<T, NX>, g, kVecThreads, 0, stream, wb, row_bytes, out, n_super, xq,
                   n, y, s);
          });
        });
        ok = true;
        return;
      }
      WithTileRows(n, [&](auto nx) {
        constexpr int NX = decltype(nx)::value;
        ForEachSliceLaunch(MatMulGrid(out, n, NX, kWarpRowsPerBlock), slices,
                           [&](dim3 g, const ProductSlices& s) {
                             Launch(KMatMulKernel<T, NX>, g, kMatMulThreads, 0, stream, wb,
                                    row_bytes, out, n_super, xq, n, y, s);
                           });
      });
      ok = true;
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace odmoe::cuda
