// Causal multi-head attention with grouped KV heads over an F32 KV cache.
//
// Work is split over (KV head, query row) pairs; each pair is computed whole
// by one thread for all query heads that share the KV head: scores with the
// canonical dot (register-tiled: 4 cache rows x the group's query heads, so
// each K row is loaded once per group), softmax with ExpF and the canonical
// sum, then out = (sum_j p_j * v_j) / sum, accumulated over j in order with
// one fma per element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_math.h"
#include "cpu_ops.h"

namespace odmoe {

namespace {

/// Scores, softmax and weighted values of `group` query heads (at `qh`, one
/// after the other) over cache rows [0, len) of one KV head.
void AttendGroup(const CpuKernels& kern, const float* qh, int group, const float* k, const float* v,
                 int64_t ld_kv, int head_dim, int64_t len, float scale, float* out,
                 std::vector<float>& scores) {
  scores.resize(static_cast<size_t>(group * len));
  for (int64_t j = 0; j < len; j += 4) {  // scores[h * len + j] = q_h . k_j
    const int rows = static_cast<int>(std::min<int64_t>(4, len - j));
    kern.tile_f32(k + j * ld_kv, ld_kv, rows, qh, head_dim, group, head_dim, scores.data() + j,
                  len);
  }
  for (int h = 0; h < group; ++h) {
    float* p = scores.data() + h * len;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) m = std::max(m, p[j] = p[j] * scale);
    for (int64_t j = 0; j < len; ++j) p[j] = cpu_math::ExpF(p[j] - m);
    const float sum = cpu_math::CanonicalSum(p, len);
    float* o = out + h * head_dim;
    std::fill(o, o + head_dim, 0.0f);
    for (int64_t j = 0; j < len; ++j) kern.axpy(p[j], v + j * ld_kv, o, head_dim);
    for (int d = 0; d < head_dim; ++d) o[d] = o[d] / sum;
  }
}

}  // namespace

void CpuAttention(const CpuOpContext& ctx, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                  int n_head, int n_head_kv, int head_dim, int pos0, float scale, Mat out) {
  const int64_t n = q.rows;
  const int group = n_head / n_head_kv;
  const int64_t work_per_item = static_cast<int64_t>(pos0 + n) * head_dim * 2 * group;
  ctx.pool->ParallelFor(n * n_head_kv, CpuRowGrain(work_per_item), [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t item = b; item < e; ++item) {
      // KV-head-major order keeps chunks balanced although later rows see more.
      const int64_t g = item / n;
      const int64_t t = item % n;
      const int64_t off = g * group * head_dim;
      AttendGroup(*ctx.kernels, q.Row(t) + off, group, k_cache.data + g * head_dim,
                  v_cache.data + g * head_dim, k_cache.cols, head_dim, pos0 + t + 1, scale,
                  out.Row(t) + off, scores);
    }
  });
}

}  // namespace odmoe
