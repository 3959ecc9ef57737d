// MatMul kernels for float and block32 weights in the canonical order: one
// half-warp per weight row, its 16 threads being the 16 lanes of
// cpu_backend.h (lane l takes elements, or 32-element blocks, l, l + 16, ...),
// reduced by the fixed tree (the K family: cuda_matmul_k.cu). A block of
// 256 threads covers 16 weight rows; blockIdx.y walks tiles of NX activation
// rows, so a weight row is read once per NX activation rows. Whatever NX or
// the grid, each output element is the same chain of operations.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "cuda_matmul_tiles.h"

namespace odmoe::cuda {

namespace {

using cuda_numerics::kLanes;

constexpr int kThreads = kMatMulThreads;
constexpr int kRowsPerBlock = kMatMulRowsPerBlock;

template <DType T, int NX>
__global__ void __launch_bounds__(kThreads)
    FloatMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out, int64_t k,
                      const float* __restrict__ x, int64_t n, float* __restrict__ y) {
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const bool row_ok = o < out;
  const uint8_t* wr = w + (row_ok ? o : 0) * row_bytes;  // idle half-warps read row 0
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
      if (lane == 0 && row_ok && t < nt) y[(t0 + t) * out + o] = v;
    }
  }
}

template <DType T, int NX>
__global__ void __launch_bounds__(kThreads)
    QuantMatMulKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t out,
                      int64_t n_blocks, const QActBlock* __restrict__ codes,
                      const float* __restrict__ scales, int64_t n, float* __restrict__ y) {
  constexpr int kBlockBytes = cuda_numerics::Block32FormatOf<T>().bytes;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const bool row_ok = o < out;
  const uint8_t* wr = w + (row_ok ? o : 0) * row_bytes;
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * NX; t0 < n;
       t0 += static_cast<int64_t>(gridDim.y) * NX) {
    const int64_t nt = n - t0 < NX ? n - t0 : NX;
    float acc[NX];
#pragma unroll
    for (int t = 0; t < NX; ++t) acc[t] = 0.0f;
#pragma unroll 2
    for (int64_t b = lane; b < n_blocks; b += kLanes) {
      cuda_numerics::Block32Weights wb;
      cuda_numerics::DecodeBlock32<T>(wr + b * kBlockBytes, &wb);
#pragma unroll
      for (int t = 0; t < NX; ++t) {
        if (t < nt) {
          const int64_t xb = (t0 + t) * n_blocks + b;
          acc[t] = cuda_numerics::Block32Step<T>(wb, codes[xb], scales[xb], acc[t]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < NX; ++t) {
      const float v = HalfWarpTree(acc[t]);
      if (lane == 0 && row_ok && t < nt) y[(t0 + t) * out + o] = v;
    }
  }
}

/// One thread per 32-element block; rows are k = 32 * n_blocks long, so
/// block b of row t starts at x + 32 * (t * n_blocks + b).
__global__ void QuantizeQ8_0Kernel(const float* __restrict__ x, int64_t total,
                                   QActBlock* __restrict__ codes, float* __restrict__ scales) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    scales[i] = cuda_numerics::QuantizeBlockQ8_0(x + 32 * i, &codes[i], nullptr);
  }
}

template <DType T>
__global__ void DequantRowsKernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t k,
                                  int64_t total, float* __restrict__ out) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    out[i] = cuda_numerics::DequantElement<T>(w + (i / k) * row_bytes, i % k);
  }
}

template <DType T>
void FloatMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const float* x, int64_t n,
                  float* y) {
  WithTileRows(n, [&](auto nx) {
    constexpr int NX = decltype(nx)::value;
    FloatMatMulKernel<T, NX><<<MatMulGrid(out, n, NX), kThreads, 0, s>>>(
        static_cast<const uint8_t*>(w), static_cast<int64_t>(RowBytes(T, k)), out, k, x, n, y);
  });
}

template <DType T>
void QuantMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const QActBlock* codes,
                  const float* scales, int64_t n, float* y) {
  WithTileRows(n, [&](auto nx) {
    constexpr int NX = decltype(nx)::value;
    QuantMatMulKernel<T, NX><<<MatMulGrid(out, n, NX), kThreads, 0, s>>>(
        static_cast<const uint8_t*>(w), static_cast<int64_t>(RowBytes(T, k)), out, k / 32, codes,
        scales, n, y);
  });
}

}  // namespace

cudaError_t LaunchFloatMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const float* x, int64_t n, float* y) {
  if (n == 0 || out == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (T == DType::kF32 || T == DType::kF16 || T == DType::kBF16) {
      FloatMatMulT<T>(stream, w, out, k, x, n, y);
      ok = true;
    }
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchQuantizeQ8_0(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActBlock* codes, float* scales) {
  const int64_t total = n * (k / 32);
  if (total == 0) return cudaSuccess;
  QuantizeQ8_0Kernel<<<GridFor(total, 128), 128, 0, stream>>>(x, total, codes, scales);
  return cudaGetLastError();
}

cudaError_t LaunchQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const QActBlock* codes, const float* scales, int64_t n,
                              float* y) {
  if (n == 0 || out == 0) return cudaSuccess;
  bool ok = false;
  VisitWeightType(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (cuda_numerics::IsBlock32(T)) {
      QuantMatMulT<T>(stream, w, out, k, codes, scales, n, y);
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
    DequantRowsKernel<decltype(tag)::value><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace odmoe::cuda
