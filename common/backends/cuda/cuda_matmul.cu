// MatMul kernels in the canonical order: one half-warp per weight row, its
// 16 threads being the 16 lanes of cpu_backend.h (lane l takes elements, or
// Q8_0 / Q4_0 blocks, l, l + 16, ...), reduced by the fixed tree. A block of
// 256 threads covers 16 weight rows; blockIdx.y walks tiles of NX activation
// rows, so a weight row is read once per NX activation rows. Whatever NX or
// the grid, each output element is the same chain of operations.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"

namespace odmoe::cuda {

namespace {

using cuda_numerics::kLanes;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kLanes;
constexpr int64_t kMaxGridY = 65535;

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
      const uint8_t* block = wr + b * cuda_numerics::QBlockBytes<T>();
      int32_t wc[8];
      cuda_numerics::DecodeWeightCodes<T>(block, wc);
      const float dw = cuda_numerics::WeightBlockScale(block);
#pragma unroll
      for (int t = 0; t < NX; ++t) {
        if (t < nt) {
          const int64_t xb = (t0 + t) * n_blocks + b;
          acc[t] = cuda_numerics::QAccumulate(dw, scales[xb],
                                              cuda_numerics::BlockIsum(wc, codes[xb]), acc[t]);
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

/// Activation rows per tile: enough to reuse each weight load, few enough
/// that the accumulators stay in registers.
int TileRows(int64_t n) { return n >= 8 ? 8 : (n >= 4 ? 4 : (n >= 2 ? 2 : 1)); }

dim3 MatMulGrid(int64_t out, int64_t n, int nx) {
  const int64_t tiles = (n + nx - 1) / nx;
  return dim3(static_cast<unsigned>((out + kRowsPerBlock - 1) / kRowsPerBlock),
              static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
}

template <DType T, int NX>
void LaunchFloatTile(cudaStream_t s, const void* w, int64_t out, int64_t k, const float* x,
                     int64_t n, float* y) {
  FloatMatMulKernel<T, NX><<<MatMulGrid(out, n, NX), kThreads, 0, s>>>(
      static_cast<const uint8_t*>(w), static_cast<int64_t>(RowBytes(T, k)), out, k, x, n, y);
}

template <DType T>
void FloatMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const float* x, int64_t n,
                  float* y) {
  switch (TileRows(n)) {
    case 8:
      LaunchFloatTile<T, 8>(s, w, out, k, x, n, y);
      break;
    case 4:
      LaunchFloatTile<T, 4>(s, w, out, k, x, n, y);
      break;
    case 2:
      LaunchFloatTile<T, 2>(s, w, out, k, x, n, y);
      break;
    default:
      LaunchFloatTile<T, 1>(s, w, out, k, x, n, y);
      break;
  }
}

template <DType T, int NX>
void LaunchQuantTile(cudaStream_t s, const void* w, int64_t out, int64_t k, const QActBlock* codes,
                     const float* scales, int64_t n, float* y) {
  QuantMatMulKernel<T, NX><<<MatMulGrid(out, n, NX), kThreads, 0, s>>>(
      static_cast<const uint8_t*>(w), static_cast<int64_t>(RowBytes(T, k)), out, k / 32, codes,
      scales, n, y);
}

template <DType T>
void QuantMatMulT(cudaStream_t s, const void* w, int64_t out, int64_t k, const QActBlock* codes,
                  const float* scales, int64_t n, float* y) {
  switch (TileRows(n)) {
    case 8:
      LaunchQuantTile<T, 8>(s, w, out, k, codes, scales, n, y);
      break;
    case 4:
      LaunchQuantTile<T, 4>(s, w, out, k, codes, scales, n, y);
      break;
    case 2:
      LaunchQuantTile<T, 2>(s, w, out, k, codes, scales, n, y);
      break;
    default:
      LaunchQuantTile<T, 1>(s, w, out, k, codes, scales, n, y);
      break;
  }
}

}  // namespace

cudaError_t LaunchFloatMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const float* x, int64_t n, float* y) {
  if (n == 0 || out == 0) return cudaSuccess;
  switch (type) {
    case DType::kF32:
      FloatMatMulT<DType::kF32>(stream, w, out, k, x, n, y);
      break;
    case DType::kF16:
      FloatMatMulT<DType::kF16>(stream, w, out, k, x, n, y);
      break;
    case DType::kBF16:
      FloatMatMulT<DType::kBF16>(stream, w, out, k, x, n, y);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
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
  switch (type) {
    case DType::kQ8_0:
      QuantMatMulT<DType::kQ8_0>(stream, w, out, k, codes, scales, n, y);
      break;
    case DType::kQ4_0:
      QuantMatMulT<DType::kQ4_0>(stream, w, out, k, codes, scales, n, y);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDequantRows(cudaStream_t stream, DType type, const void* w, int64_t k,
                              int64_t first, int64_t rows, float* out) {
  const int64_t total = rows * k;
  if (total == 0) return cudaSuccess;
  const int64_t rb = static_cast<int64_t>(RowBytes(type, k));
  const auto* base = static_cast<const uint8_t*>(w) + first * rb;
  const unsigned grid = GridFor(total, 256);
  switch (type) {
    case DType::kF32:
      DequantRowsKernel<DType::kF32><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
      break;
    case DType::kF16:
      DequantRowsKernel<DType::kF16><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
      break;
    case DType::kBF16:
      DequantRowsKernel<DType::kBF16><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
      break;
    case DType::kQ8_0:
      DequantRowsKernel<DType::kQ8_0><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
      break;
    case DType::kQ4_0:
      DequantRowsKernel<DType::kQ4_0><<<grid, 256, 0, stream>>>(base, rb, k, total, out);
      break;
  }
  return cudaGetLastError();
}

}  // namespace odmoe::cuda
