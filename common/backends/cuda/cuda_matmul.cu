// MatMul kernels for float and block32 weights in the canonical order of
// cpu_backend.h (lane l takes elements, or 32-element blocks, l, l + 16, ...),
// reduced by the fixed tree (the K family: cuda_matmul_k.cu). Float weights:
// one half-warp per weight row, its 16 threads the 16 lanes, 16 rows per block
// of 256 threads. Block32 weights: one warp per weight row, staged in shared
// memory (cuda_matmul_tiles.h), 8 rows per block. blockIdx.y walks tiles of
// NX activation rows, so a weight row is read once per NX activation rows.
// Whatever NX or the grid, each output element is the same chain of
// operations.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "cuda_matmul_tiles.h"
#include "cuda_quantize_warp.h"

namespace odmoe::cuda {

namespace {

using cuda_numerics::kLanes;

constexpr int kThreads = kMatMulThreads;
constexpr int kRowsPerBlock = kMatMulRowsPerBlock;

template <DType T, int NX>
__global__ void __launch_bounds__(kThreads)
    FloatMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t k,
                      const float* __restrict__ x, int64_t n, float* __restrict__ y,
                      ProductSlices slices) {
  AfterPriorKernels();
  const Slice sl = PickSlice(slices, w, y, out);
  x += sl.x_row * k;
  y = sl.y;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const bool row_ok = o < out;
  const uint8_t* wr = sl.w + (row_ok ? o : 0) * row_bytes;  // idle half-warps read row 0
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * NX; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * NX) {
    const int64_t nt = n - t0 < NX ? n - t0 : NX;
    float acc[NX];
#pragma unroll
    for (int t = 0; t < NX; ++t) acc[t] = 0.0f;
#pragma unroll 4
    for (int64_t i = lane; i < k; i += kLanes) {
      const float wv = cuda_numerics::LoadFloat<T>(wr, i);
#pragma unroll
      for (int t = 0; t < NX; ++t) {
        if (t < nt) acc[t] = cuda_numerics::Fma(wv, x[(t0 + t) * k + i], acc[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < NX; ++t) {
      const float v = HalfWarpTree(acc[t]);
      if (lane == 0 && row_ok && t < nt) y[(t0 + t) * out + o] = SliceValue(sl, v);
    }
  }
}

/// Blocks staged per thread in one stretch of a row: a stretch is 32 * G
/// blocks of about 2 KiB.
template <DType T>
ODMOE_HD constexpr int Block32Groups() {
  constexpr int g = 2304 / (32 * cuda_numerics::Block32FormatOf<T>().bytes);
  return g < 1 ? 1 : g;
}

template <DType T>
ODMOE_HD constexpr int Block32StageVecs() {
  return (32 * Block32Groups<T>() * cuda_numerics::Block32FormatOf<T>().bytes + 31) / 16;
}

/// Lane accumulators of one weight row `wr` against NX activation rows
/// (codes / scales + r * x_stride, r < nt), computed by one warp (`t` = the
/// thread's index in it) through its staging buffer `buf`, the row staged
/// 32 * G blocks at a time. Thread t computes the exact integer sums of blocks
/// s0 + 32 g + t; lane l (threads l and l + 16 alike) then takes the float
/// steps of blocks s0 + 32 g + l and s0 + 32 g + 16 + l in that order, with
/// the sums shuffled from the threads that computed them: lane l's blocks
/// l, l + 16, ... in the canonical order.
template <DType T, int NX>
__device__ __forceinline__ void QuantRowLanes(const uint8_t* __restrict__ wr, uint8_t* buf,
                                              const QActBlock* codes, const float* scales,
                                              int64_t x_stride, int64_t n_blocks, int nt, int t,
                                              float* acc) {
  constexpr cuda_numerics::Block32Format F = cuda_numerics::Block32FormatOf<T>();
  constexpr bool kMin = F.min_offset >= 0;
  constexpr int G = Block32Groups<T>();
  constexpr int kStretch = 32 * G;
  const int lane = t % kLanes;
#pragma unroll
  for (int r = 0; r < NX; ++r) acc[r] = 0.0f;
  for (int64_t s0 = 0; s0 < n_blocks; s0 += kStretch) {
    const int units = static_cast<int>(n_blocks - s0 < kStretch ? n_blocks - s0 : kStretch);
    const int skew = StageBytes(buf, wr + s0 * F.bytes, units * F.bytes, t);
    __syncwarp();
    const uint8_t* blocks = buf + skew;
    int32_t isum[G][NX], sx[G][NX];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int u = 32 * g + t;
      int32_t wc[8];
      if (u < units) {
#pragma unroll
        for (int m = 0; m < 8; ++m)
          wc[m] = cuda_numerics::Block32CodeWord<T>(blocks + u * F.bytes, m);
      }
#pragma unroll
      for (int r = 0; r < NX; ++r) {
        isum[g][r] = sx[g][r] = 0;
        if (u < units && r < nt) {
          const QActBlock& xb = codes[r * x_stride + s0 + u];
          isum[g][r] = cuda_numerics::BlockIsum(wc, xb);
          if constexpr (kMin) sx[g][r] = cuda_numerics::ActCodeSum(xb);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int src = kLanes * h + lane;
        const int u = 32 * g + src;
        const uint8_t* block = blocks + u * F.bytes;
        float dw = 0.0f, mw = 0.0f;
        if (u < units) {
          dw = cuda_numerics::Block32Scale<T>(block);
          if constexpr (kMin) mw = cuda_numerics::Block32Min<T>(block);
        }
#pragma unroll
        for (int r = 0; r < NX; ++r) {
          const int32_t is = __shfl_sync(kFullMask, isum[g][r], src);
          int32_t sxv = 0;
          if constexpr (kMin) sxv = __shfl_sync(kFullMask, sx[g][r], src);
          if (u < units && r < nt) {
            const float dx = scales[r * x_stride + s0 + u];
            acc[r] = cuda_numerics::QAccumulate(dw, dx, is, acc[r]);
            if constexpr (kMin) acc[r] = cuda_numerics::QAccumulate(mw, dx, sxv, acc[r]);
          }
        }
      }
    }
    __syncwarp();
  }
}

/// One warp per weight row (kWarpRowsPerBlock rows per block), blockIdx.y
/// walking tiles of NX activation rows quantized beforehand.
template <DType T, int NX>
__global__ void __launch_bounds__(kThreads)
    QuantMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out,
                      int64_t n_blocks, const QActBlock* __restrict__ codes,
                      const float* __restrict__ scales, int64_t n, float* __restrict__ y,
                      ProductSlices slices) {
  AfterPriorKernels();
  __shared__ uint4 stage[kWarpRowsPerBlock][Block32StageVecs<T>()];
  const Slice sl = PickSlice(slices, w, y, out);
  codes += sl.x_row * n_blocks;
  scales += sl.x_row * n_blocks;
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
    QuantRowLanes<T, NX>(wr, buf, codes + t0 * n_blocks, scales + t0 * n_blocks, n_blocks, n_blocks,
                         nt, t, acc);
#pragma unroll
    for (int r = 0; r < NX; ++r) {
      const float v = HalfWarpTree(acc[r]);
      if (t == 0 && row_ok && r < nt) y[(t0 + r) * out + o] = SliceValue(sl, v);
    }
  }
}

/// Activation and weight elements staged per pass of FloatGemvRowKernel.
constexpr int kFloatGemvChunk = 2048;

/// One activation row against few weight rows (a router): a block per weight
/// row stages chunks of the row (widened to f32 by LoadFloat) and of x in
/// shared memory with all its threads, so the loads are in flight together,
/// and its first 16 threads, lane l each, continue the canonical chain over
/// the chunk's elements i = l mod 16; then the lane tree. The bits of
/// FloatMatMulKernel.
template <DType T>
__global__ void __launch_bounds__(kThreads)
    FloatGemvRowKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t k,
                       const float* __restrict__ x, float* __restrict__ y, ProductSlices slices) {
  AfterPriorKernels();
  __shared__ float w_sh[kFloatGemvChunk];
  __shared__ float x_sh[kFloatGemvChunk];
  const Slice sl = PickSlice(slices, w, y, out);
  x += sl.x_row * k;
  y = sl.y;
  const int64_t o = blockIdx.x;
  const uint8_t* wr = sl.w + o * row_bytes;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  float acc = 0.0f;
  for (int64_t c0 = 0; c0 < k; c0 += kFloatGemvChunk) {  // c0 % 16 == 0: lanes stay
    const int len = static_cast<int>(k - c0 < kFloatGemvChunk ? k - c0 : kFloatGemvChunk);
    for (int i = static_cast<int>(threadIdx.x); i < len; i += kThreads) {
      w_sh[i] = cuda_numerics::LoadFloat<T>(wr, c0 + i);
      x_sh[i] = x[c0 + i];
    }
    __syncthreads();
    if (threadIdx.x < kLanes) {
      for (int i = lane; i < len; i += kLanes) acc = cuda_numerics::Fma(w_sh[i], x_sh[i], acc);
    }
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    const float v = HalfWarpTree(acc);
    if (threadIdx.x == 0) y[o] = SliceValue(sl, v);
  }
}

/// One warp per 32-element block (cuda_quantize_warp.h); rows are
/// k = 32 * n_blocks long, so block b of row t starts at x + 32 * (t * n_blocks + b).
template <class Src>
__global__ void __launch_bounds__(128)
    QuantizeQ8_0Kernel(Src src, int64_t total, QActBlock* __restrict__ codes,
                       float* __restrict__ scales) {
  AfterPriorKernels();
  const int l = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = GridThreads() / 32;
  for (int64_t i = GlobalThread() / 32; i < total; i += warps) {
    QuantizeBlockQ8_0Warp(src, i, &codes[i], &scales[i], l);
  }
}

template <DType T>
__global__ void DequantRowsKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t k,
                                  int64_t total, float* __restrict__ out) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    out[i] = cuda_numerics::DequantElement<T>(w + (i / k) * row_bytes, i % k);
  }
}

/// Weight rows up to which one activation row takes FloatGemvRowKernel.
constexpr int64_t kFloatGemvMaxRows = 1024;

template <DType T>
void FloatMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const float* x, int64_t n,
                  float* y, const ProductSlices& slices) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto row_bytes = static_cast<int64_t>(RowBytes(T, k));
  if (n == 1 && out <= kFloatGemvMaxRows) {
    ForEachSliceLaunch(
        dim3(static_cast<unsigned>(out)), slices, [&](dim3 g, const ProductSlices& sl) {
          Launch(FloatGemvRowKernel<T>, g, kThreads, 0, s, wb, row_bytes, out, k, x, y, sl);
        });
    return;
  }
  WithTileRows(n, [&](auto nx) {
    constexpr int NX = decltype(nx)::value;
    ForEachSliceLaunch(MatMulGrid(out, n, NX), slices, [&](dim3 g, const ProductSlices& sl) {
      Launch(FloatMatMulKernel<T, NX>, g, kThreads, 0, s, wb, row_bytes, out, k, x, n, y, sl);
    });
  });
}

template <DType T>
void QuantMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const QActBlock* codes,
                  const float* scales, int64_t n, float* y, const ProductSlices& slices) {
  WithTileRows(n, [&](auto nx) {
    constexpr int NX = decltype(nx)::value;
    ForEachSliceLaunch(
        MatMulGrid(out, n, NX, kWarpRowsPerBlock), slices, [&](dim3 g, const ProductSlices& sl) {
          Launch(QuantMatMulKernel<T, NX>, g, kThreads, 0, s, static_cast<const uint8_t*>(w),
                 static_cast<int64_t>(RowBytes(T, k)), out, k / 32, codes, scales, n, y, sl);
        });
  });
}

}  // namespace

cudaError_t LaunchFloatMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const float* x, int64_t n, float* y,
                              const ProductSlices& slices) {
  if (n == 0 || out == 0 || slices.count == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (T == DType::kF32 || T == DType::kF16 || T == DType::kBF16) {
      FloatMatMulT<T>(stream, w, out, k, x, n, y, slices);
      ok = true;
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchQuantizeQ8_0(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActBlock* codes, float* scales) {
  const int64_t total = n * (k / 32);
  if (total == 0) return cudaSuccess;
  Launch(QuantizeQ8_0Kernel<PlainRows>, GridFor(total * 32, 128), 128, 0, stream, PlainRows{x},
         total, codes, scales);
  return cudaGetLastError();
}

cudaError_t LaunchQuantizeQ8_0SwiGlu(cudaStream_t stream, float* gate, const float* up, int64_t n,
                                     int64_t k, QActBlock* codes, float* scales) {
  const int64_t total = n * (k / 32);
  if (total == 0) return cudaSuccess;
  Launch(QuantizeQ8_0Kernel<SwiGluRows>, GridFor(total * 32, 128), 128, 0, stream,
         SwiGluRows{gate, up}, total, codes, scales);
  return cudaGetLastError();
}

cudaError_t LaunchQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const QActBlock* codes, const float* scales, int64_t n,
                              float* y, const ProductSlices& slices) {
  if (n == 0 || out == 0 || slices.count == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (cuda_numerics::IsBlock32(T)) {
      QuantMatMulT<T>(stream, w, out, k, codes, scales, n, y, slices);
      ok = true;
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchDequantRows(cudaStream_t stream, DType type, const void* w, int64_t k,
                              int64_t first, int64_t rows, float* out) {
  const int64_t total = rows * k;
  if (total == 0) return cudaSuccess;
  const int64_t rb = static_cast<int64_t>(RowBytes(type, k));
  const auto* base = static_cast<const uint8_t*>(w) + first * rb;
  const unsigned grid = GridFor(total, 256);
  const bool ok = VisitWeightType(type, [&](auto tag) {
    Launch(DequantRowsKernel<decltype(tag)::value>, grid, 256, 0, stream, base, rb, k, total, out);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace odmoe::cuda
