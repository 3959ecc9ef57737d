// The CPU backend's Mamba-2 ops (backend.h: CausalConvBiasSilu, also
// CausalConvSilu's body with no bias, Mamba2Scan, GroupRmsNormGated), the
// reference for every backend. The scan runs one
// row at a time in each head (heads spread over the threads, rows in
// order), so the result does not depend on the thread count nor on how a
// sequence's rows were split into calls. Sums over the state and over a
// norm group take their elements in index order, one accumulator: the
// order the CUDA kernels follow.
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_math.h"
#include "cpu_ops.h"

namespace odmoe {

void CpuCausalConvBiasSilu(const CpuOpContext& ctx, ConstMat x, const float* weight,
                           const float* bias, int kernel, const float* state_in, float* state_out,
                           Mat out) {
  const int64_t channels = x.cols, hist = kernel - 1;
  ctx.pool->ParallelFor(channels, CpuRowGrain(8 * x.rows * kernel), [&](int64_t cb, int64_t ce) {
    std::vector<float> w(static_cast<size_t>(hist + x.rows));
    for (int64_t c = cb; c < ce; ++c) {
      for (int64_t j = 0; j < hist; ++j) {
        w[static_cast<size_t>(j)] = state_in ? state_in[j * channels + c] : 0.0f;
      }
      for (int64_t t = 0; t < x.rows; ++t) w[static_cast<size_t>(hist + t)] = x.Row(t)[c];
      const float* wc = weight + c * kernel;
      for (int64_t t = 0; t < x.rows; ++t) {
        float acc = 0.0f;
        for (int j = 0; j < kernel; ++j) acc = acc + wc[j] * w[static_cast<size_t>(t + j)];
        out.Row(t)[c] = cpu_math::Silu(bias ? acc + bias[c] : acc);
      }
      for (int64_t j = 0; j < hist; ++j) {
        state_out[j * channels + c] = w[static_cast<size_t>(x.rows + j)];
      }
    }
  });
}

void CpuMamba2Scan(const CpuOpContext& ctx, ConstMat xbc, ConstMat dt, const float* a,
                   const float* d, const float* dt_bias, const Mamba2Params& p,
                   const float* state_in, float* state_out, Mat out) {
  const int hd = p.head_dim, ns = p.state;
  const int64_t inner = p.inner(), head_floats = int64_t{hd} * ns;
  ctx.pool->ParallelFor(p.n_heads, 1, [&](int64_t hb, int64_t he) {
    for (int64_t h = hb; h < he; ++h) {
      float* s = state_out + h * head_floats;
      if (state_in == nullptr) {
        std::memset(s, 0, static_cast<size_t>(head_floats) * sizeof(float));
      } else if (state_in != state_out) {
        std::memcpy(s, state_in + h * head_floats, static_cast<size_t>(head_floats) * 4);
      }
      const int64_t g = p.group_of(static_cast<int>(h));
      for (int64_t t = 0; t < xbc.rows; ++t) {
        const float* row = xbc.Row(t);
        const float* x = row + h * hd;
        const float* b = row + inner + g * ns;
        const float* c = row + inner + int64_t{p.n_groups} * ns + g * ns;
        const float u = dt.Row(t)[h] + dt_bias[h];
        const float step = u > 20.0f ? u : std::log1p(cpu_math::ExpF(u));
        const float decay = cpu_math::ExpF(step * a[h]);
        float* o = out.Row(t) + h * hd;
        for (int i = 0; i < hd; ++i) {
          float* si = s + int64_t{i} * ns;
          const float xd = x[i] * step;
          float y = 0.0f;
          for (int k = 0; k < ns; ++k) {
            si[k] = si[k] * decay + b[k] * xd;
            y = y + si[k] * c[k];
          }
          o[i] = y + d[h] * x[i];
        }
      }
    }
  });
}

void CpuGroupRmsNormGated(const CpuOpContext& ctx, ConstMat y, ConstMat z, const float* weight,
                          int group, float eps, Mat out) {
  const int64_t cols = y.cols;
  ctx.pool->ParallelFor(y.rows, CpuRowGrain(4 * cols), [&](int64_t b, int64_t e) {
    std::vector<float> g(static_cast<size_t>(group));
    for (int64_t t = b; t < e; ++t) {
      for (int64_t c0 = 0; c0 < cols; c0 += group) {
        float sum_sq = 0.0f;
        for (int i = 0; i < group; ++i) {
          const float v = y.Row(t)[c0 + i] * cpu_math::Silu(z.Row(t)[c0 + i]);
          g[static_cast<size_t>(i)] = v;
          sum_sq = sum_sq + v * v;
        }
        const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(group) + eps);
        for (int i = 0; i < group; ++i) {
          out.Row(t)[c0 + i] = (g[static_cast<size_t>(i)] * scale) * weight[c0 + i];
        }
      }
    }
  });
}

}  // namespace odmoe
