// Causal multi-head attention with grouped KV heads over an F32 KV cache,
// with the options of AttentionOptions (sinks, a sliding window, V heads of
// their own width).
//
// Work is split over (KV head, query row) pairs; each pair is computed whole
// by one thread for all query heads that share the KV head: scores with the
// canonical dot (register-tiled: 4 cache rows x the group's query heads, so
// each K row is loaded once per group) over the visible rows [first, p],
// softmax with ExpF and the canonical sum (the sink's ExpF(z - max) added
// after it), then out = (sum_j p_j * v_j) / sum, accumulated over j in order
// with one fma per element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_math.h"
#include "cpu_ops.h"

namespace odmoe {

namespace {

/// One (KV head, query row) pair: `group` query heads at `qh` (one after the
/// other, head_dim each), cache rows from `k` / `v` (the first visible row
/// of the KV head; strides ld_k / ld_v), `len` visible rows.
struct GroupJob {
  const float* qh;
  int group;
  const float* k;
  const float* v;
  int64_t ld_k;
  int64_t ld_v;
  int head_dim;
  int v_head_dim;
  int64_t len;
  float scale;
  const float* sinks;  // the group's first query head's sink, or null
  float* out;          // v_head_dim floats per query head
};

/// Scores, softmax and weighted values of one GroupJob.
void AttendGroup(const CpuKernels& kern, const GroupJob& g, std::vector<float>& scores) {
  const int64_t len = g.len;
  scores.resize(static_cast<size_t>(g.group * len));
  for (int64_t j = 0; j < len; j += 4) {  // scores[h * len + j] = q_h . k_j
    const int rows = static_cast<int>(std::min<int64_t>(4, len - j));
    kern.tile_f32(g.k + j * g.ld_k, g.ld_k, rows, g.qh, g.head_dim, g.group, g.head_dim,
                  scores.data() + j, len);
  }
  for (int h = 0; h < g.group; ++h) {
    float* p = scores.data() + h * len;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) m = std::max(m, p[j] = p[j] * g.scale);
    if (g.sinks != nullptr) m = std::max(m, g.sinks[h]);
    for (int64_t j = 0; j < len; ++j) p[j] = cpu_math::ExpF(p[j] - m);
    float sum = cpu_math::CanonicalSum(p, len);
    if (g.sinks != nullptr) sum = sum + cpu_math::ExpF(g.sinks[h] - m);
    float* o = g.out + h * g.v_head_dim;
    std::fill(o, o + g.v_head_dim, 0.0f);
    for (int64_t j = 0; j < len; ++j) kern.axpy(p[j], g.v + j * g.ld_v, o, g.v_head_dim);
    for (int d = 0; d < g.v_head_dim; ++d) o[d] = o[d] / sum;
  }
}

}  // namespace

void CpuAttention(const CpuOpContext& ctx, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                  int n_head, int n_head_kv, int head_dim, int pos0, float scale,
                  const AttentionOptions& options, Mat out) {
  const int64_t n = q.rows;
  const int group = n_head / n_head_kv;
  const int vd = options.v_head_dim > 0 ? options.v_head_dim : head_dim;
  const int64_t visible =
      options.window > 0 ? std::min<int64_t>(options.window, pos0 + n) : pos0 + n;
  const int64_t work_per_item = visible * (head_dim + vd) * group;
  ctx.pool->ParallelFor(n * n_head_kv, CpuRowGrain(work_per_item), [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t item = b; item < e; ++item) {
      // KV-head-major order keeps chunks balanced although later rows see more.
      const int64_t g = item / n;
      const int64_t t = item % n;
      const int64_t p = pos0 + t;
      const int64_t first = options.window > 0 ? std::max<int64_t>(0, p - options.window + 1) : 0;
      GroupJob job;
      job.qh = q.Row(t) + g * group * head_dim;
      job.group = group;
      job.k = k_cache.Row(first) + g * head_dim;
      job.v = v_cache.Row(first) + g * vd;
      job.ld_k = k_cache.cols;
      job.ld_v = v_cache.cols;
      job.head_dim = head_dim;
      job.v_head_dim = vd;
      job.len = p + 1 - first;
      job.scale = scale;
      job.sinks = options.sinks != nullptr ? options.sinks + g * group : nullptr;
      job.out = out.Row(t) + g * group * vd;
      AttendGroup(*ctx.kernels, job, scores);
    }
  });
}

}  // namespace odmoe
