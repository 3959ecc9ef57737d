// The row-wise ops of the CUDA backend: embedding lookup, normalisation,
// RoPE, softmax, routing, the SwiGLU activations and the row copies. Elementwise ops use one
// thread per element; reductions (RmsNorm, Softmax) one block per row whose
// first half-warp forms the canonical 16 lanes and tree.
#include "backend/expert_order.h"
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"
#include "cuda_quantize_warp.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

constexpr int kThreads = 256;

template <DType T>
__global__ void GetRowsKernel(const uint8_t* __restrict__ table, int64_t row_bytes, int64_t cols,
                              const int32_t* __restrict__ ids, int64_t total,
                              float* __restrict__ out) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t t = i / cols;
    out[i] = num::DequantElement<T>(table + static_cast<int64_t>(ids[t]) * row_bytes, i % cols);
  }
}

/// Up to 4 * blockDim.x float4s of src copied to dst by the block: each
/// thread issues its four loads before any store (the loads are in flight
/// together; a plain loop would wait for each).
__device__ __forceinline__ void CopyVec4Chunk(const float4* __restrict__ src,
                                              float4* __restrict__ dst, int64_t first, int64_t n) {
  float4 v[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t i = first + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < n) v[u] = src[i];
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t i = first + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < n) dst[i] = v[u];
  }
}

/// Up to 4 * blockDim.x float4s of x + a (each component as AddKernel adds)
/// written to both x and dst by the block, the loads in flight together.
__device__ __forceinline__ void AddVec4Chunk(float4* x, const float4* __restrict__ a,
                                             float4* __restrict__ dst, int64_t first, int64_t n) {
  float4 v[4], w[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t i = first + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < n) {
      v[u] = x[i];
      w[u] = a[i];
    }
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t i = first + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < n) {
      const float4 s =
          make_float4(v[u].x + w[u].x, v[u].y + w[u].y, v[u].z + w[u].z, v[u].w + w[u].w);
      x[i] = s;
      dst[i] = s;
    }
  }
}

/// Block per row: the row is staged in shared memory by every thread (when
/// `staged`: all loads in flight at once, instead of warp 0's 16 lanes each
/// walking d / 16 global loads), then warp 0 forms the canonical dot x.x
/// (both of its half-warps compute it; lane 0 keeps it), then every thread
/// scales. kVec4 (rows of a multiple of 4 floats, x, y, weight and `add`
/// 16-byte aligned, staged): the copies and the scaling move float4s, four
/// per thread in flight; each element's arithmetic is the same. With `add`
/// (AddRmsNorm): x = x + add first, written back, and that row normalized.
/// With q.q8k and / or q.q8_0_codes (kVec4 only; RmsNormCanQuantize): the
/// block keeps the output row in shared memory too and its warps quantize it
/// to Q8_K and / or Q8_0 (cuda_quantize_warp.h: the quantize kernels' bits
/// for the same floats).
template <bool kVec4>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(float* x, const float* __restrict__ add, const float* __restrict__ weight,
                  float eps, float* y, int64_t rows, int64_t d, bool staged, NormQuantOut q) {
  AfterPriorKernels();
  extern __shared__ float4 row_sh4[];
  float* row_sh = reinterpret_cast<float*>(row_sh4);
  __shared__ float scale_sh;
  const bool quantize = q.q8k != nullptr || q.q8_0_codes != nullptr;
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    float* xw = x + t * d;
    const float* xr = xw;
    const float* ar = add != nullptr ? add + t * d : nullptr;
    if (staged) {
      if constexpr (kVec4) {
        for (int64_t i = 0; i < d / 4; i += 4 * static_cast<int64_t>(blockDim.x)) {
          if (ar != nullptr) {
            AddVec4Chunk(reinterpret_cast<float4*>(xw), reinterpret_cast<const float4*>(ar),
                         row_sh4, i, d / 4);
          } else {
            CopyVec4Chunk(reinterpret_cast<const float4*>(xr), row_sh4, i, d / 4);
          }
        }
      } else {
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
          if (ar != nullptr) xw[i] = xw[i] + ar[i];
          row_sh[i] = xw[i];
        }
      }
      __syncthreads();
      xr = row_sh;
    } else if (ar != nullptr) {  // the sum in place first; the block sees its writes
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x) xw[i] = xw[i] + ar[i];
      __syncthreads();
    }
    if (threadIdx.x < 32) {
      // The staged row read through a shared-memory pointer (shared loads,
      // not generic ones); the same chain either way.
      const int l = static_cast<int>(threadIdx.x % num::kLanes);
      const float lane = staged ? num::LaneDot<DType::kF32>(row_sh, row_sh, d, l)
                                : num::LaneDot<DType::kF32>(xr, xr, d, l);
      const float sum_sq = HalfWarpTree(lane);
      if (threadIdx.x == 0) scale_sh = 1.0f / num::Sqrt(sum_sq / static_cast<float>(d) + eps);
    }
    __syncthreads();
    const float scale = scale_sh;
    float* yr = y + t * d;
    if constexpr (kVec4) {
      const auto* w4 = reinterpret_cast<const float4*>(weight);
      auto* y4 = reinterpret_cast<float4*>(yr);
      for (int64_t i0 = 0; i0 < d / 4; i0 += 4 * static_cast<int64_t>(blockDim.x)) {
        float4 w[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t i = i0 + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
          if (i < d / 4) w[u] = w4[i];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t i = i0 + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
          if (i < d / 4) {
            const float4 v = row_sh4[i];
            const float4 out = make_float4((v.x * scale) * w[u].x, (v.y * scale) * w[u].y,
                                           (v.z * scale) * w[u].z, (v.w * scale) * w[u].w);
            y4[i] = out;
            if (quantize) row_sh4[i] = out;  // element i is this thread's alone
          }
        }
      }
      if (quantize) {
        __syncthreads();
        const int lane = static_cast<int>(threadIdx.x % 32);
        const int64_t warp = threadIdx.x / 32, warps = blockDim.x / 32;
        const int64_t supers = q.q8k != nullptr ? d / kSuperBlockElems : 0;
        const int64_t blocks = q.q8_0_codes != nullptr ? d / 32 : 0;
        const PlainRows out_row{row_sh};
        for (int64_t sb = warp; sb < supers; sb += warps) {
          QuantizeSuperBlockWarp(out_row, sb, &q.q8k[t * supers + sb], lane);
        }
        for (int64_t b = warp; b < blocks; b += warps) {
          QuantizeBlockQ8_0Warp(out_row, b, &q.q8_0_codes[t * blocks + b],
                                &q.q8_0_scales[t * blocks + b], lane);
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = (xr[i] * scale) * weight[i];
    }
    __syncthreads();  // scale_sh and row_sh are rewritten for the next row
  }
}

/// The rows one RopeKernel launch rotates: x [rows, cols] of `heads` heads,
/// `total` = rows * heads * half rotated pairs.
struct RopeRows {
  float* x = nullptr;
  int64_t cols = 0;
  int64_t heads = 0;
  int64_t total = 0;
};

/// One thread per rotated pair, over a's pairs then b's (RopePair; b empty
/// for Rope): the same element operations either way.
__global__ void RopeKernel(RopeRows a, RopeRows b, int head_dim, int offset, int half,
                           const int32_t* __restrict__ positions,
                           const double* __restrict__ inv_freq, double attention_factor,
                           bool interleaved) {
  AfterPriorKernels();
  for (int64_t j = GlobalThread(); j < a.total + b.total; j += GridThreads()) {
    const bool second = j >= a.total;
    const RopeRows& r = second ? b : a;
    const int64_t idx = second ? j - a.total : j;
    const int i = static_cast<int>(idx % half);
    const int64_t h = (idx / half) % r.heads;
    const int64_t t = idx / (static_cast<int64_t>(half) * r.heads);
    const double theta = static_cast<double>(positions[t]) * inv_freq[i];
    float c, s;
    num::RopeCosSin(theta, attention_factor, &c, &s);
    float* v = r.x + t * r.cols + h * head_dim + offset;
    const int i0 = interleaved ? 2 * i : i;
    const int i1 = interleaved ? 2 * i + 1 : i + half;
    num::RopeRotate(c, s, &v[i0], &v[i1]);
  }
}

/// Block per row: max, exp in place, canonical sum (warp 0), divide.
__global__ void __launch_bounds__(kThreads) SoftmaxKernel(float* x, int64_t rows, int64_t d) {
  AfterPriorKernels();
  __shared__ float red[kThreads / 32];
  __shared__ float sum_sh;
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    float* v = x + t * d;
    float m = num::NegInfinity();
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) m = num::MaxSkipNan(m, v[i]);
    m = BlockMaxSkipNan(m, red);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v[i] = num::ExpF(v[i] - m);
    __syncthreads();
    if (threadIdx.x < 32) {
      const float sum = HalfWarpTree(num::LaneSum(v, d, threadIdx.x % num::kLanes));
      if (threadIdx.x == 0) sum_sh = sum;
    }
    __syncthreads();
    const float sum = sum_sh;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) v[i] = v[i] / sum;
    __syncthreads();
  }
}

__global__ void RouterTopKKernel(const float* __restrict__ logits, int64_t rows, int n_expert,
                                 int k, bool normalize, float scale, int32_t* ids, float* weights) {
  AfterPriorKernels();
  for (int64_t t = GlobalThread(); t < rows; t += GridThreads()) {
    num::RouterTopKRow(logits + t * n_expert, n_expert, k, normalize, scale, ids + t * k,
                       weights + t * k);
  }
}

__global__ void RouterTopKSigmoidKernel(const float* __restrict__ logits, int64_t rows,
                                        int n_expert, int k, RouterGating gating, int32_t* ids,
                                        float* weights) {
  AfterPriorKernels();
  for (int64_t t = GlobalThread(); t < rows; t += GridThreads()) {
    num::RouterTopKSigmoidRow(logits + t * n_expert, n_expert, k, gating.normalize, gating.scale,
                              gating.n_group, gating.n_group_used, gating.selection_bias,
                              ids + t * k, weights + t * k);
  }
}

__global__ void AddBiasKernel(float* x, const float* bias, int64_t cols, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) x[i] = x[i] + bias[i % cols];
}

__global__ void SigmoidKernel(float* x, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) x[i] = num::Sigmoid(x[i]);
}

__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    out[i] = num::Silu(gate[i]) * up[i];
  }
}

__global__ void GeGluKernel(const float* gate, const float* up, float* out, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    out[i] = num::GeGlu(gate[i], up[i]);
  }
}

__global__ void ScaleKernel(float* x, const float* factor, int64_t total) {
  AfterPriorKernels();
  const float f = factor[0];
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) x[i] = x[i] * f;
}

__global__ void SoftCapKernel(float* x, float cap, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    x[i] = cap * num::TanhF(x[i] / cap);
  }
}

__global__ void SwiGluOaiKernel(const float* gate, const float* up, float alpha, float limit,
                                float* out, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    out[i] = num::SwiGluOai(gate[i], up[i], alpha, limit);
  }
}

__global__ void AddKernel(const float* a, const float* b, float* out, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) out[i] = a[i] + b[i];
}

__global__ void GatherRowsKernel(const float* __restrict__ src, const int32_t* __restrict__ idx,
                                 int64_t cols, int64_t total, float* __restrict__ dst) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    dst[i] = src[static_cast<int64_t>(idx[i / cols]) * cols + i % cols];
  }
}

/// One thread per column, walking the source rows in order, so repeated
/// destination rows accumulate in the documented order.
__global__ void ScatterAddScaledKernel(const float* __restrict__ src,
                                       const int32_t* __restrict__ idx,
                                       const float* __restrict__ scale, int64_t rows, int64_t cols,
                                       float* dst) {
  AfterPriorKernels();
  for (int64_t c = GlobalThread(); c < cols; c += GridThreads()) {
    for (int64_t i = 0; i < rows; ++i) {
      float* d = dst + static_cast<int64_t>(idx[i]) * cols + c;
      *d = *d + scale[i] * src[i * cols + c];
    }
  }
}

/// One thread per element of out: its row's terms in NextExpertSlot's order
/// from 0, each added as ScatterAddScaled adds (no fused multiply-add).
__global__ void CombineExpertsKernel(const float* __restrict__ ys, const int32_t* __restrict__ ids,
                                     const float* __restrict__ weights, int k, int64_t rows,
                                     int64_t cols, float* __restrict__ out) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < rows * cols; i += GridThreads()) {
    const int64_t t = i / cols, c = i % cols;
    const int32_t* row_ids = ids + t * k;
    float acc = 0.0f;
    for (int j = NextExpertSlot(row_ids, k, -1); j >= 0; j = NextExpertSlot(row_ids, k, j)) {
      acc = acc + weights[t * k + j] * ys[(t * k + j) * cols + c];
    }
    out[i] = acc;
  }
}

unsigned RowGrid(int64_t rows) {
  return static_cast<unsigned>(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535);
}

}  // namespace

cudaError_t LaunchGetRows(cudaStream_t stream, DType type, const void* table, int64_t cols,
                          const int32_t* ids, int64_t n, float* out) {
  const int64_t total = n * cols;
  if (total == 0) return cudaSuccess;
  const auto* t = static_cast<const uint8_t*>(table);
  const int64_t rb = static_cast<int64_t>(RowBytes(type, cols));
  const unsigned grid = GridFor(total, kThreads);
  const bool ok = VisitWeightType(type, [&](auto tag) {
    Launch(GetRowsKernel<decltype(tag)::value>, grid, kThreads, 0, stream, t, rb, cols, ids, total,
           out);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

namespace {

/// Rows RmsNormKernel<true> takes: staged in shared memory, float4s.
bool Vec4Rows(const float* x, const float* add, const float* weight, const float* y, int64_t cols) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return static_cast<size_t>(cols) * sizeof(float) <= kStagedRowMaxBytes && cols % 4 == 0 &&
         aligned(x) && aligned(y) && aligned(weight) && (add == nullptr || aligned(add));
}

/// RmsNorm of x's rows, after x = x + add when `add` is given; with q.q8k,
/// their quantizations too (the caller checked RmsNormCanQuantize).
cudaError_t LaunchRmsNormOf(cudaStream_t stream, float* x, const float* add, int64_t rows,
                            int64_t cols, const float* weight, float eps, float* y,
                            const NormQuantOut& q) {
  if (rows == 0) return cudaSuccess;
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(float);
  const bool staged = row_bytes <= kStagedRowMaxBytes;
  const bool quantize = q.q8k != nullptr || q.q8_0_codes != nullptr;
  const bool vec4 = Vec4Rows(x, add, weight, y, cols);
  if (quantize && (cols % kSuperBlockElems != 0 || !vec4)) {
    return cudaErrorInvalidValue;
  }
  if (vec4) {
    Launch(RmsNormKernel<true>, RowGrid(rows), kThreads, row_bytes, stream, x, add, weight, eps, y,
           rows, cols, staged, q);
  } else {
    Launch(RmsNormKernel<false>, RowGrid(rows), kThreads, staged ? row_bytes : 0, stream, x, add,
           weight, eps, y, rows, cols, staged, q);
  }
  return cudaGetLastError();
}

}  // namespace

bool RmsNormCanQuantize(ConstMat x, const float* add, const float* weight, Mat y) {
  return x.cols % kSuperBlockElems == 0 && Vec4Rows(x.data, add, weight, y.data, x.cols);
}

cudaError_t LaunchRmsNorm(cudaStream_t stream, ConstMat x, const float* weight, float eps, Mat y,
                          const NormQuantOut& q) {
  // Without `add` the kernel never writes x.
  return LaunchRmsNormOf(stream, const_cast<float*>(x.data), nullptr, x.rows, x.cols, weight, eps,
                         y.data, q);
}

cudaError_t LaunchAddRmsNorm(cudaStream_t stream, Mat x, ConstMat a, const float* weight, float eps,
                             Mat y, const NormQuantOut& q) {
  return LaunchRmsNormOf(stream, x.data, a.data, x.rows, x.cols, weight, eps, y.data, q);
}

cudaError_t LaunchRope(cudaStream_t stream, Mat x, int head_dim, const int32_t* positions,
                       const double* inv_freq, const RopeParams& rope) {
  return LaunchRopePair(stream, x, Mat{}, head_dim, positions, inv_freq, rope);
}

cudaError_t LaunchRopePair(cudaStream_t stream, Mat a, Mat b, int head_dim,
                           const int32_t* positions, const double* inv_freq,
                           const RopeParams& rope) {
  const int half = rope.dims / 2;
  const auto rows_of = [&](Mat m) {
    RopeRows r;
    r.x = m.data;
    r.cols = m.cols;
    r.heads = m.cols / head_dim;
    r.total = m.rows * r.heads * half;
    return r;
  };
  const RopeRows ra = rows_of(a), rb = rows_of(b);
  const int64_t total = ra.total + rb.total;
  if (total == 0) return cudaSuccess;
  Launch(RopeKernel, GridFor(total, kThreads), kThreads, 0, stream, ra, rb, head_dim, rope.offset,
         half, positions, inv_freq, RopeAttentionFactor(rope), rope.mode == RopeMode::kInterleaved);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmax(cudaStream_t stream, Mat x) {
  if (x.rows == 0 || x.cols == 0) return cudaSuccess;
  Launch(SoftmaxKernel, RowGrid(x.rows), kThreads, 0, stream, x.data, x.rows, x.cols);
  return cudaGetLastError();
}

cudaError_t LaunchRouterTopK(cudaStream_t stream, ConstMat logits, int k, RouterGating gating,
                             int32_t* ids, float* weights) {
  if (logits.rows == 0) return cudaSuccess;
  if (gating.score == RouterScore::kSigmoid) {
    Launch(RouterTopKSigmoidKernel, GridFor(logits.rows, 64), 64, 0, stream, logits.data,
           logits.rows, static_cast<int>(logits.cols), k, gating, ids, weights);
    return cudaGetLastError();
  }
  Launch(RouterTopKKernel, GridFor(logits.rows, 64), 64, 0, stream, logits.data, logits.rows,
         static_cast<int>(logits.cols), k, gating.normalize, gating.scale, ids, weights);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(cudaStream_t stream, Mat x, const float* bias) {
  const int64_t total = x.rows * x.cols;
  if (total == 0) return cudaSuccess;
  Launch(AddBiasKernel, GridFor(total, kThreads), kThreads, 0, stream, x.data, bias, x.cols, total);
  return cudaGetLastError();
}

cudaError_t LaunchSigmoid(cudaStream_t stream, Mat x) {
  const int64_t total = x.rows * x.cols;
  if (total == 0) return cudaSuccess;
  Launch(SigmoidKernel, GridFor(total, kThreads), kThreads, 0, stream, x.data, total);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(cudaStream_t stream, ConstMat gate, ConstMat up, Mat out) {
  const int64_t total = out.rows * out.cols;
  if (total == 0) return cudaSuccess;
  Launch(SwiGluKernel, GridFor(total, kThreads), kThreads, 0, stream, gate.data, up.data, out.data,
         total);
  return cudaGetLastError();
}

cudaError_t LaunchGeGlu(cudaStream_t stream, ConstMat gate, ConstMat up, Mat out) {
  const int64_t total = out.rows * out.cols;
  if (total == 0) return cudaSuccess;
  Launch(GeGluKernel, GridFor(total, kThreads), kThreads, 0, stream, gate.data, up.data, out.data,
         total);
  return cudaGetLastError();
}

cudaError_t LaunchScale(cudaStream_t stream, Mat x, const float* factor) {
  const int64_t total = x.rows * x.cols;
  if (total == 0) return cudaSuccess;
  Launch(ScaleKernel, GridFor(total, kThreads), kThreads, 0, stream, x.data, factor, total);
  return cudaGetLastError();
}

cudaError_t LaunchSoftCap(cudaStream_t stream, Mat x, float cap) {
  const int64_t total = x.rows * x.cols;
  if (total == 0) return cudaSuccess;
  Launch(SoftCapKernel, GridFor(total, kThreads), kThreads, 0, stream, x.data, cap, total);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluOai(cudaStream_t stream, ConstMat gate, ConstMat up, float alpha,
                            float limit, Mat out) {
  const int64_t total = out.rows * out.cols;
  if (total == 0) return cudaSuccess;
  Launch(SwiGluOaiKernel, GridFor(total, kThreads), kThreads, 0, stream, gate.data, up.data, alpha,
         limit, out.data, total);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(cudaStream_t stream, ConstMat a, ConstMat b, Mat out) {
  const int64_t total = out.rows * out.cols;
  if (total == 0) return cudaSuccess;
  Launch(AddKernel, GridFor(total, kThreads), kThreads, 0, stream, a.data, b.data, out.data, total);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(cudaStream_t stream, ConstMat src, const int32_t* idx, Mat dst) {
  const int64_t total = dst.rows * dst.cols;
  if (total == 0) return cudaSuccess;
  Launch(GatherRowsKernel, GridFor(total, kThreads), kThreads, 0, stream, src.data, idx, dst.cols,
         total, dst.data);
  return cudaGetLastError();
}

cudaError_t LaunchScatterAddScaled(cudaStream_t stream, ConstMat src, const int32_t* idx,
                                   const float* scale, Mat dst) {
  if (src.rows == 0 || src.cols == 0) return cudaSuccess;
  Launch(ScatterAddScaledKernel, GridFor(src.cols, 128), 128, 0, stream, src.data, idx, scale,
         src.rows, src.cols, dst.data);
  return cudaGetLastError();
}

cudaError_t LaunchCombineExperts(cudaStream_t stream, ConstMat ys, const int32_t* ids,
                                 const float* weights, int k, Mat out) {
  if (out.rows == 0 || out.cols == 0) return cudaSuccess;
  Launch(CombineExpertsKernel, GridFor(out.rows * out.cols, 128), 128, 0, stream, ys.data, ids,
         weights, k, out.rows, out.cols, out.data);
  return cudaGetLastError();
}

}  // namespace odmoe::cuda
