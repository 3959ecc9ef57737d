// The CUDA backend's linear-attention ops (backend.h: Mul, CausalConvSilu,
// GatedDeltaNet), computed as the CPU backend's reference
// (cpu_delta_net.cpp) operation for operation: products and sums rounded
// one by one (__fmul_rn / __fadd_rn, no fused multiply-add), dot products
// in eight lanes added in lane order, ExpF as the CPU's. The convolution is
// cuda_mamba2.cu's without a bias; the recurrence takes one block per value
// head (a thread per row of the head's state), rows in order.
#include "cuda_kernel_util.h"
#include "cuda_kernels.h"

namespace odmoe::cuda {

namespace {

namespace num = cuda_numerics;

constexpr int kThreads = 256;

__device__ __forceinline__ float Mad(float acc, float a, float b) {
  return __fadd_rn(acc, __fmul_rn(a, b));
}

__device__ float DotLanes(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
#pragma unroll
    for (int l = 0; l < 8; ++l) acc[l] = Mad(acc[l], a[i + l], b[i + l]);
  }
  float s = 0.0f;
#pragma unroll
  for (int l = 0; l < 8; ++l) s = __fadd_rn(s, acc[l]);
  for (; i < n; ++i) s = Mad(s, a[i], b[i]);
  return s;
}

__global__ void MulKernel(const float* a, const float* b, float* out, int64_t total) {
  AfterPriorKernels();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) out[i] = __fmul_rn(a[i], b[i]);
}

// One block per value head; thread i owns row i of the head's state.
__global__ void GatedDeltaNetKernel(const float* __restrict__ qkv, int64_t rows, int64_t qkv_cols,
                                    const float* __restrict__ alpha, const float* __restrict__ beta,
                                    int64_t head_cols, const float* __restrict__ a,
                                    const float* __restrict__ dt_bias, DeltaNetParams p,
                                    const float* state_in, float* state_out,
                                    float* __restrict__ out, int64_t out_cols) {
  AfterPriorKernels();
  extern __shared__ float shared[];
  float* q = shared;             // head_k
  float* k = shared + p.head_k;  // head_k
  __shared__ float scalars[2];   // decay, beta
  const int j = blockIdx.x, hk = p.head_k, hv = p.head_v;
  const int64_t head_floats = static_cast<int64_t>(hv) * hk;
  const int64_t key_dim = static_cast<int64_t>(p.n_k_heads) * hk;
  // DeltaNetParams::key_head_of (a host function).
  const int kh = p.v_heads_tiled ? j % p.n_k_heads : j / (p.n_v_heads / p.n_k_heads);
  const float q_scale = 1.0f / sqrtf(static_cast<float>(hk));
  float* s_all = state_out + j * head_floats;
  for (int64_t e = threadIdx.x; e < head_floats; e += blockDim.x) {
    s_all[e] = state_in ? state_in[j * head_floats + e] : 0.0f;
  }
  __syncthreads();
  for (int64_t t = 0; t < rows; ++t) {
    const float* row = qkv + t * qkv_cols;
    for (int c = threadIdx.x; c < hk; c += blockDim.x) {
      q[c] = row[kh * hk + c];
      k[c] = row[key_dim + kh * hk + c];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const float qi =
          __fmul_rn(__frcp_rn(sqrtf(__fadd_rn(DotLanes(q, q, hk), p.l2_eps))), q_scale);
      const float ki = __frcp_rn(sqrtf(__fadd_rn(DotLanes(k, k, hk), p.l2_eps)));
      for (int c = 0; c < hk; ++c) {
        q[c] = __fmul_rn(q[c], qi);
        k[c] = __fmul_rn(k[c], ki);
      }
      const float u = __fadd_rn(alpha[t * head_cols + j], dt_bias[j]);
      const float softplus = u > 20.0f ? u : log1pf(num::ExpF(u));
      scalars[0] = num::ExpF(__fmul_rn(a[j], softplus));
      scalars[1] = num::Sigmoid(beta[t * head_cols + j]);
    }
    __syncthreads();
    const float decay = scalars[0], b = scalars[1];
    const float* v = row + 2 * key_dim + static_cast<int64_t>(j) * hv;
    for (int i = threadIdx.x; i < hv; i += blockDim.x) {
      float* si = s_all + static_cast<int64_t>(i) * hk;
      for (int c = 0; c < hk; ++c) si[c] = __fmul_rn(si[c], decay);
      const float d = __fmul_rn(__fadd_rn(v[i], -DotLanes(si, k, hk)), b);
      for (int c = 0; c < hk; ++c) si[c] = Mad(si[c], k[c], d);
      out[t * out_cols + static_cast<int64_t>(j) * hv + i] = DotLanes(si, q, hk);
    }
    __syncthreads();
  }
}

}  // namespace

cudaError_t LaunchMul(cudaStream_t stream, ConstMat a, ConstMat b, Mat out) {
  const int64_t total = out.rows * out.cols;
  if (total == 0) return cudaSuccess;
  Launch(MulKernel, GridFor(total, kThreads), kThreads, 0, stream, a.data, b.data, out.data, total);
  return cudaGetLastError();
}

cudaError_t LaunchCausalConvSilu(cudaStream_t stream, ConstMat x, const float* weight, int kernel,
                                 const float* state_in, float* state_out, Mat out) {
  // cuda_mamba2.cu's convolution without a bias.
  return LaunchCausalConvBiasSilu(stream, x, weight, nullptr, kernel, state_in, state_out, out);
}

cudaError_t LaunchGatedDeltaNet(cudaStream_t stream, ConstMat qkv, ConstMat alpha, ConstMat beta,
                                const float* a, const float* dt_bias, const DeltaNetParams& p,
                                const float* state_in, float* state_out, Mat out) {
  if (p.n_v_heads == 0) return cudaSuccess;
  const int threads = p.head_v < 1024 ? p.head_v : 1024;
  Launch(GatedDeltaNetKernel, dim3(p.n_v_heads), dim3(threads),
         2 * static_cast<size_t>(p.head_k) * sizeof(float), stream, qkv.data, qkv.rows, qkv.cols,
         alpha.data, beta.data, alpha.cols, a, dt_bias, p, state_in, state_out, out.data, out.cols);
  return cudaGetLastError();
}

}  // namespace odmoe::cuda
