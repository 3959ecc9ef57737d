// The CUDA backend's Mamba-2 ops (backend.h: CausalConvBiasSilu, Mamba2Scan,
// GroupRmsNormGated), computed as the CPU backend's reference
// (cpu_mamba2.cpp) operation for operation: products and sums rounded one
// by one (__fmul_rn / __fadd_rn, no fused multiply-add), sums in index
// order, ExpF as the CPU's. The convolution takes one thread per channel;
// the scan one block per head, a thread per row of the head's state, rows
// in order; the norm one thread per (row, group).
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

constexpr int kThreads = 256;
constexpr int kMaxConvKernel = 8;

__device__ __forceinline__ float Mad(float acc, float a, float b) {
  return __fadd_rn(acc, __fmul_rn(a, b));
}

__global__ void CausalConvBiasSiluKernel(const float* __restrict__ x, int64_t rows,
                                         int64_t channels, const float* __restrict__ weight,
                                         const float* __restrict__ bias, int kernel,
                                         const float* state_in, float* state_out,
                                         float* __restrict__ out) {
  AfterPriorKernels();
  const int hist = kernel - 1;
  for (int64_t c = GlobalThread(); c < channels; c += GridThreads()) {
    float win[kMaxConvKernel];
    for (int j = 0; j < hist; ++j) win[j] = state_in ? state_in[j * channels + c] : 0.0f;
    const float* wc = weight + c * kernel;
    for (int64_t t = 0; t < rows; ++t) {
      win[hist] = x[t * channels + c];
      float acc = 0.0f;
      for (int j = 0; j < kernel; ++j) acc = Mad(acc, wc[j], win[j]);
      out[t * channels + c] = num::Silu(bias ? __fadd_rn(acc, bias[c]) : acc);
      for (int j = 0; j < hist; ++j) win[j] = win[j + 1];
    }
    for (int j = 0; j < hist; ++j) state_out[j * channels + c] = win[j];
  }
}

// One block per head; thread i owns row i of the head's state.
__global__ void Mamba2ScanKernel(const float* __restrict__ xbc, int64_t rows, int64_t xbc_cols,
                                 const float* __restrict__ dt, const float* __restrict__ a,
                                 const float* __restrict__ d, const float* __restrict__ dt_bias,
                                 Mamba2Params p, const float* state_in, float* state_out,
                                 float* __restrict__ out) {
  AfterPriorKernels();
  __shared__ float scalars[2];  // step, decay
  const int h = blockIdx.x, hd = p.head_dim, ns = p.state;
  const int64_t inner = static_cast<int64_t>(p.n_heads) * hd;
  const int64_t head_floats = static_cast<int64_t>(hd) * ns;
  const int g = h / (p.n_heads / p.n_groups);  // Mamba2Params::group_of
  float* s_all = state_out + h * head_floats;
  for (int64_t e = threadIdx.x; e < head_floats; e += blockDim.x) {
    s_all[e] = state_in ? state_in[h * head_floats + e] : 0.0f;
  }
  __syncthreads();
  for (int64_t t = 0; t < rows; ++t) {
    const float* row = xbc + t * xbc_cols;
    const float* x = row + static_cast<int64_t>(h) * hd;
    const float* b = row + inner + static_cast<int64_t>(g) * ns;
    const float* c = row + inner + static_cast<int64_t>(p.n_groups) * ns + g * ns;
    if (threadIdx.x == 0) {
      const float u = __fadd_rn(dt[t * p.n_heads + h], dt_bias[h]);
      const float step = u > 20.0f ? u : log1pf(num::ExpF(u));
      scalars[0] = step;
      scalars[1] = num::ExpF(__fmul_rn(step, a[h]));
    }
    __syncthreads();
    const float step = scalars[0], decay = scalars[1];
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
      float* si = s_all + static_cast<int64_t>(i) * ns;
      const float xd = __fmul_rn(x[i], step);
      float y = 0.0f;
      for (int k = 0; k < ns; ++k) {
        si[k] = Mad(__fmul_rn(si[k], decay), b[k], xd);
        y = Mad(y, si[k], c[k]);
      }
      out[t * inner + static_cast<int64_t>(h) * hd + i] = Mad(y, d[h], x[i]);
    }
    __syncthreads();
  }
}

__global__ void GroupRmsNormGatedKernel(const float* __restrict__ y, const float* __restrict__ z,
                                        const float* __restrict__ weight, int64_t rows,
                                        int64_t cols, int group, float eps,
                                        float* __restrict__ out) {
  AfterPriorKernels();
  const int64_t groups = cols / group;
  for (int64_t e = GlobalThread(); e < rows * groups; e += GridThreads()) {
    const int64_t base = (e / groups) * cols + (e % groups) * group;
    const int64_t wbase = (e % groups) * group;
    float sum_sq = 0.0f;
    for (int i = 0; i < group; ++i) {
      const float v = __fmul_rn(y[base + i], num::Silu(z[base + i]));
      sum_sq = Mad(sum_sq, v, v);
    }
    const float scale = 1.0f / sqrtf(__fadd_rn(sum_sq / static_cast<float>(group), eps));
    for (int i = 0; i < group; ++i) {
      const float v = __fmul_rn(y[base + i], num::Silu(z[base + i]));
      out[base + i] = __fmul_rn(__fmul_rn(v, scale), weight[wbase + i]);
    }
  }
}

}  // namespace

cudaError_t LaunchCausalConvBiasSilu(cudaStream_t stream, ConstMat x, const float* weight,
                                     const float* bias, int kernel, const float* state_in,
                                     float* state_out, Mat out) {
  if (kernel < 1 || kernel > kMaxConvKernel) return cudaErrorInvalidValue;
  if (x.cols == 0) return cudaSuccess;
  Launch(CausalConvBiasSiluKernel, GridFor(x.cols, kThreads), kThreads, 0, stream, x.data, x.rows,
         x.cols, weight, bias, kernel, state_in, state_out, out.data);
  return cudaGetLastError();
}

cudaError_t LaunchMamba2Scan(cudaStream_t stream, ConstMat xbc, ConstMat dt, const float* a,
                             const float* d, const float* dt_bias, const Mamba2Params& p,
                             const float* state_in, float* state_out, Mat out) {
  if (p.n_heads == 0) return cudaSuccess;
  const int threads = p.head_dim < kThreads ? ((p.head_dim + 31) / 32) * 32 : kThreads;
  Launch(Mamba2ScanKernel, p.n_heads, threads, 0, stream, xbc.data, xbc.rows, xbc.cols, dt.data, a,
         d, dt_bias, p, state_in, state_out, out.data);
  return cudaGetLastError();
}

cudaError_t LaunchGroupRmsNormGated(cudaStream_t stream, ConstMat y, ConstMat z,
                                    const float* weight, int group, float eps, Mat out) {
  if (group < 1 || y.cols % group != 0) return cudaErrorInvalidValue;
  const int64_t total = y.rows * (y.cols / group);
  if (total == 0) return cudaSuccess;
  Launch(GroupRmsNormGatedKernel, GridFor(total, kThreads), kThreads, 0, stream, y.data, z.data,
         weight, y.rows, y.cols, group, eps, out.data);
  return cudaGetLastError();
}

}  // namespace odmoe::cuda
