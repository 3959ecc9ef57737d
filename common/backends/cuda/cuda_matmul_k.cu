// MatMul with K-family weights (Q2_K .. Q6_K, IQ4_XS) in the canonical order
// of cpu_backend.h (steps A-D): activation rows are quantized to Q8_K on the
// device (one warp per super-block), then one half-warp per weight row, its
// thread l being lane l (super-blocks l, l + 16, ...: exact int32 sums over
// the sub-blocks, then the fma step), reduced by the fixed tree. Tiles of NX
// activation rows share each decoded weight super-block, as in
// cuda_matmul.cu; every output element is the same chain of operations
// whatever NX or the grid.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "cuda_matmul_tiles.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

constexpr int kQuantizeThreads = 128;

/// One warp per super-block: thread l scans elements 8l..8l+7, the picks of
/// the largest magnitude are merged across the warp (merging in any order
/// gives the sequential scan's pick), then thread l writes code words 2l and
/// 2l+1 and the even threads the per-16 sums.
__global__ void __launch_bounds__(kQuantizeThreads)
    QuantizeQ8KKernel(const float* __restrict__ x, int64_t total, QActSuperBlock* __restrict__ xq) {
  const int l = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = GridThreads() / 32;
  for (int64_t s = GlobalThread() / 32; s < total; s += warps) {
    const float* xs = x + s * kSuperBlockElems + 8 * l;
    num::AbsMaxPick p;
    for (int i = 0; i < 8; ++i) num::PickAbsMax(&p, xs[i], 8 * l + i);
    for (int off = 16; off > 0; off /= 2) {
      num::AbsMaxPick q;
      q.amax = __shfl_xor_sync(kFullMask, p.amax, off);
      q.max = __shfl_xor_sync(kFullMask, p.max, off);
      q.index = __shfl_xor_sync(kFullMask, p.index, off);
      p = num::MergeAbsMax(p, q);
    }
    const bool zero = p.amax == 0.0f;
    const float iscale = num::Q8KInverseScale(p);
    const int32_t w0 = zero ? 0 : num::Q8KCodeWord(iscale, xs);
    const int32_t w1 = zero ? 0 : num::Q8KCodeWord(iscale, xs + 4);
    QActSuperBlock& out = xq[s];
    out.qs[2 * l] = w0;
    out.qs[2 * l + 1] = w1;
    const int32_t sum8 = num::ByteSum(w0) + num::ByteSum(w1);
    const int32_t next = __shfl_down_sync(kFullMask, sum8, 1);
    if (l % 2 == 0) out.bsum[l / 2] = sum8 + next;
    if (l == 0) out.d = zero ? 0.0f : 1.0f / iscale;
  }
}

template <DType T, int NX>
__global__ void __launch_bounds__(kMatMulThreads)
    KMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t n_super,
                  const QActSuperBlock* __restrict__ xq, int64_t n, float* __restrict__ y) {
  constexpr int kBlockBytes = num::KFormatOf<T>().bytes;
  const int lane = static_cast<int>(threadIdx.x % num::kLanes);
  const int64_t o =
      static_cast<int64_t>(blockIdx.x) * kMatMulRowsPerBlock + threadIdx.x / num::kLanes;
  const bool row_ok = o < out;
  const uint8_t* wr = w + (row_ok ? o : 0) * row_bytes;  // idle half-warps read row 0
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * NX; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * NX) {
    const int nt = static_cast<int>(n - t0 < NX ? n - t0 : NX);
    float acc[NX];
#pragma unroll
    for (int t = 0; t < NX; ++t) acc[t] = 0.0f;
    for (int64_t s = lane; s < n_super; s += num::kLanes) {
      const uint8_t* sb = wr + s * kBlockBytes;
      const QActSuperBlock* xs = xq + t0 * n_super + s;
      int32_t a[NX], b[NX];
      num::KSuperBlockSums<T, NX>(sb, xs, n_super, nt, a, b);
#pragma unroll
      for (int t = 0; t < NX; ++t) {
        if (t < nt) acc[t] = num::KStep<T>(sb, xs[t * n_super].d, a[t], b[t], acc[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < NX; ++t) {
      const float v = HalfWarpTree(acc[t]);
      if (lane == 0 && row_ok && t < nt) y[(t0 + t) * out + o] = v;
    }
  }
}

}  // namespace

cudaError_t LaunchQuantizeQ8_K(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActSuperBlock* xq) {
  const int64_t total = n * (k / kSuperBlockElems);
  if (total == 0) return cudaSuccess;
  QuantizeQ8KKernel<<<GridFor(total * 32, kQuantizeThreads), kQuantizeThreads, 0, stream>>>(
      x, total, xq);
  return cudaGetLastError();
}

cudaError_t LaunchKQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                               int64_t k, const QActSuperBlock* xq, int64_t n, float* y) {
  if (n == 0 || out == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (num::IsKFamily(T)) {
      WithTileRows(n, [&](auto nx) {
        constexpr int NX = decltype(nx)::value;
        KMatMulKernel<T, NX><<<MatMulGrid(out, n, NX), kMatMulThreads, 0, stream>>>(
            static_cast<const uint8_t*>(w), static_cast<int64_t>(RowBytes(T, k)), out,
            k / kSuperBlockElems, xq, n, y);
      });
      ok = true;
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace odmoe::cuda
