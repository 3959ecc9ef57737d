// The CPU backend's linear-attention ops (backend.h: Mul, CausalConvSilu,
// GatedDeltaNet; the convolution is cpu_mamba2.cpp's without a bias), the
// reference for every backend. The recurrence runs one
// row at a time in each value head (heads spread over the threads, rows in
// order), so the result does not depend on the thread count nor on how a
// sequence's rows were split into calls. Dot products keep eight partial
// sums (lane l takes elements l, l + 8, ...) added in lane order, then the
// tail: a fixed order the CUDA kernels follow.
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_math.h"
#include "cpu_ops.h"

namespace odmoe {
namespace {

float DotLanes(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] = acc[l] + a[i + l] * b[i + l];
  }
  float s = 0.0f;
  for (int l = 0; l < 8; ++l) s = s + acc[l];
  for (; i < n; ++i) s = s + a[i] * b[i];
  return s;
}

// x / sqrt(sum x^2 + eps) * scale into out.
void L2Normed(const float* x, int n, float eps, float scale, float* out) {
  const float inv = 1.0f / std::sqrt(DotLanes(x, x, n) + eps) * scale;
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace

void CpuMul(const CpuOpContext& ctx, ConstMat a, ConstMat b, Mat out) {
  ctx.pool->ParallelFor(out.rows, CpuRowGrain(out.cols), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* x = a.Row(t);
      const float* y = b.Row(t);
      float* o = out.Row(t);
      for (int64_t c = 0; c < out.cols; ++c) o[c] = x[c] * y[c];
    }
  });
}

void CpuCausalConvSilu(const CpuOpContext& ctx, ConstMat x, const float* weight, int kernel,
                       const float* state_in, float* state_out, Mat out) {
  CpuCausalConvBiasSilu(ctx, x, weight, nullptr, kernel, state_in, state_out, out);  // no bias
}

void CpuGatedDeltaNet(const CpuOpContext& ctx, ConstMat qkv, ConstMat alpha, ConstMat beta,
                      const float* a, const float* dt_bias, const DeltaNetParams& p,
                      const float* state_in, float* state_out, Mat out) {
  const int hk = p.head_k, hv = p.head_v;
  const int64_t key_dim = int64_t{p.n_k_heads} * hk;
  const int64_t head_floats = int64_t{hv} * hk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(hk));
  ctx.pool->ParallelFor(p.n_v_heads, 1, [&](int64_t jb, int64_t je) {
    std::vector<float> q(static_cast<size_t>(hk)), k(static_cast<size_t>(hk));
    for (int64_t j = jb; j < je; ++j) {
      float* s = state_out + j * head_floats;
      if (state_in == nullptr) {
        std::memset(s, 0, static_cast<size_t>(head_floats) * sizeof(float));
      } else if (state_in != state_out) {
        std::memcpy(s, state_in + j * head_floats, static_cast<size_t>(head_floats) * 4);
      }
      const int64_t kh = p.key_head_of(static_cast<int>(j));
      for (int64_t t = 0; t < qkv.rows; ++t) {
        const float* row = qkv.Row(t);
        L2Normed(row + kh * hk, hk, p.l2_eps, q_scale, q.data());
        L2Normed(row + key_dim + kh * hk, hk, p.l2_eps, 1.0f, k.data());
        const float* v = row + 2 * key_dim + j * hv;
        const float u = alpha.Row(t)[j] + dt_bias[j];
        const float softplus = u > 20.0f ? u : std::log1p(cpu_math::ExpF(u));
        const float decay = cpu_math::ExpF(a[j] * softplus);
        const float b = 1.0f / (1.0f + cpu_math::ExpF(-beta.Row(t)[j]));
        float* o = out.Row(t) + j * hv;
        for (int i = 0; i < hv; ++i) {
          float* si = s + int64_t{i} * hk;
          for (int c = 0; c < hk; ++c) si[c] = si[c] * decay;
          const float d = (v[i] - DotLanes(si, k.data(), hk)) * b;
          for (int c = 0; c < hk; ++c) si[c] = si[c] + k[static_cast<size_t>(c)] * d;
          o[i] = DotLanes(si, q.data(), hk);
        }
      }
    }
  });
}

}  // namespace odmoe
