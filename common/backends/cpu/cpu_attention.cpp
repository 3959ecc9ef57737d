// Causal multi-head attention with grouped KV heads over an F32 KV cache.
//
// Work is split over (head, query row) pairs; each pair is computed whole by
// one thread: scores with the canonical dot, softmax with ExpF and the
// canonical sum, then out = (sum_j p_j * v_j) / sum, accumulated over j in
// order with one fma per element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_math.h"
#include "cpu_ops.h"

namespace odmoe {

void CpuAttention(const CpuOpContext& ctx, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                  int n_head, int n_head_kv, int head_dim, int pos0, float scale, Mat out) {
  const int64_t n = q.rows;
  const int group = n_head / n_head_kv;
  const CpuKernels& kern = *ctx.kernels;
  const int64_t work_per_item = static_cast<int64_t>(pos0 + n) * head_dim * 2;
  ctx.pool->ParallelFor(n * n_head, CpuRowGrain(work_per_item), [&](int64_t b, int64_t e) {
    std::vector<float> p(static_cast<size_t>(pos0 + n));
    std::vector<float> acc(static_cast<size_t>(head_dim));
    for (int64_t item = b; item < e; ++item) {
      // Head-major order keeps chunks balanced although later rows see more.
      const int64_t h = item / n;
      const int64_t t = item % n;
      const int64_t kv_off = (h / group) * head_dim;
      const float* qh = q.Row(t) + h * head_dim;
      const int64_t len = pos0 + t + 1;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < len; ++j) {
        p[j] = kern.dot_f32(qh, k_cache.Row(j) + kv_off, head_dim) * scale;
        m = std::max(m, p[j]);
      }
      for (int64_t j = 0; j < len; ++j) p[j] = cpu_math::ExpF(p[j] - m);
      const float sum = cpu_math::CanonicalSum(p.data(), len);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < len; ++j) kern.axpy(p[j], v_cache.Row(j) + kv_off, acc.data(), head_dim);
      float* o = out.Row(t) + h * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[d] / sum;
    }
  });
}

}  // namespace odmoe
