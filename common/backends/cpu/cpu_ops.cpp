// The row-wise ops of the CPU backend: embedding lookup, normalisation, RoPE,
// softmax, routing and the SwiGLU activations.
#include "cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_kquant.h"
#include "cpu_math.h"
#include "tensor/quant.h"

namespace odmoe {

using cpu_math::CanonicalSum;
using cpu_math::ExpF;

void CpuGetRows(const CpuOpContext& ctx, const WeightRef& table, const int32_t* ids, Mat out) {
  const auto* base = static_cast<const uint8_t*>(table.data);
  const size_t row_bytes = table.row_bytes();
  // KInterleave16 tables: a row of a whole group is put back in row order.
  const int64_t interleaved_rows =
      table.layout == WeightLayout::kInterleaved16 ? table.rows / kInterleaveRows * kInterleaveRows
                                                   : 0;
  ctx.pool->ParallelFor(out.rows, CpuRowGrain(out.cols), [&](int64_t b, int64_t e) {
    thread_local std::vector<uint8_t> stored;
    for (int64_t t = b; t < e; ++t) {
      const uint8_t* row = base + static_cast<size_t>(ids[t]) * row_bytes;
      if (ids[t] < interleaved_rows) {
        if (stored.size() < row_bytes) stored.resize(row_bytes);
        const int64_t g = ids[t] / kInterleaveRows;
        DeinterleaveKRow(table.type, base + static_cast<size_t>(g) * kInterleaveRows * row_bytes,
                         row_bytes, static_cast<int>(ids[t] % kInterleaveRows), stored.data());
        row = stored.data();
      }
      ctx.kernels->dequant_row(table.type, row, out.Row(t), out.cols);
    }
  });
}

void CpuRmsNorm(const CpuOpContext& ctx, ConstMat x, const float* weight, float eps, Mat y) {
  const int64_t d = x.cols;
  ctx.pool->ParallelFor(x.rows, CpuRowGrain(2 * d), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* xr = x.Row(t);
      const float sum_sq = ctx.kernels->dot_f32(xr, xr, d);
      const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(d) + eps);
      float* yr = y.Row(t);
      for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * scale) * weight[i];
    }
  });
}

void CpuRope(const CpuOpContext& ctx, Mat x, int head_dim, const int32_t* positions,
             const RopeParams& rope) {
  const int half = rope.dims / 2;
  const int64_t n_heads = x.cols / head_dim;
  // Inverse frequencies in double, shared by all rows (rope.h).
  const std::vector<double> inv_freq = RopeInverseFrequencies(rope);
  const double factor = RopeAttentionFactor(rope);
  const bool interleaved = rope.mode == RopeMode::kInterleaved;
  ctx.pool->ParallelFor(x.rows, CpuRowGrain(x.cols), [&](int64_t b, int64_t e) {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    for (int64_t t = b; t < e; ++t) {
      for (int i = 0; i < half; ++i) {
        const double theta = positions[t] * inv_freq[i];
        cos_t[i] = static_cast<float>(std::cos(theta) * factor);
        sin_t[i] = static_cast<float>(std::sin(theta) * factor);
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x.Row(t) + h * head_dim + rope.offset;
        for (int i = 0; i < half; ++i) {
          const int i0 = interleaved ? 2 * i : i;
          const int i1 = interleaved ? 2 * i + 1 : i + half;
          const float a = v[i0];
          const float c = v[i1];
          v[i0] = a * cos_t[i] - c * sin_t[i];
          v[i1] = a * sin_t[i] + c * cos_t[i];
        }
      }
    }
  });
}

namespace {

/// In place: v[i] = exp(v[i] - max) / sum, with the canonical sum.
void SoftmaxRow(float* v, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, v[i]);
  for (int64_t i = 0; i < n; ++i) v[i] = ExpF(v[i] - m);
  const float sum = CanonicalSum(v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] / sum;
}

}  // namespace

void CpuSoftmax(const CpuOpContext& ctx, Mat x) {
  ctx.pool->ParallelFor(x.rows, CpuRowGrain(8 * x.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) SoftmaxRow(x.Row(t), x.cols);
  });
}

namespace {

/// Index of the largest v[i] not yet taken (strict '>': the lowest index on
/// ties, -inf included); marks it taken.
int64_t TakeLargest(const float* v, int64_t n, std::vector<char>& taken) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
  }
  taken[best] = 1;
  return best;
}

/// RouterTopK's sigmoid rule (backend.h) for every row: DeepSeek-V3's
/// biased, group-limited selection, unbiased weights in descending order.
void CpuRouterTopKSigmoid(ConstMat logits, int k, const RouterGating& gating, int32_t* ids,
                          float* weights) {
  const int64_t n_expert = logits.cols;
  const int64_t per_group = gating.group_limited() ? n_expert / gating.n_group : n_expert;
  std::vector<float> s(static_cast<size_t>(n_expert)), b(static_cast<size_t>(n_expert));
  std::vector<float> group_rank(static_cast<size_t>(gating.n_group));
  std::vector<char> taken(static_cast<size_t>(n_expert));
  std::vector<char> kept(static_cast<size_t>(gating.n_group));
  for (int64_t t = 0; t < logits.rows; ++t) {
    const float* l = logits.Row(t);
    int32_t* id = ids + t * k;
    float* wt = weights + t * k;
    for (int64_t e = 0; e < n_expert; ++e) {
      s[e] = 1.0f / (1.0f + ExpF(-l[e]));
      b[e] = gating.selection_bias != nullptr ? s[e] + gating.selection_bias[e] : s[e];
    }
    if (gating.group_limited()) {
      for (int g = 0; g < gating.n_group; ++g) {  // the sum of the group's two largest
        float top1 = -std::numeric_limits<float>::infinity(), top2 = top1;
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
          if (b[e] > top1) {
            top2 = top1;
            top1 = b[e];
          } else if (b[e] > top2) {
            top2 = b[e];
          }
        }
        group_rank[g] = top1 + top2;
      }
      std::fill(kept.begin(), kept.end(), 0);
      for (int r = 0; r < gating.n_group_used; ++r) {
        TakeLargest(group_rank.data(), gating.n_group, kept);
      }
      for (int g = 0; g < gating.n_group; ++g) {
        if (kept[g]) continue;
        std::fill(b.begin() + g * per_group, b.begin() + (g + 1) * per_group,
                  -std::numeric_limits<float>::infinity());
      }
    }
    std::fill(taken.begin(), taken.end(), 0);
    for (int j = 0; j < k; ++j) {
      const int64_t e = TakeLargest(b.data(), n_expert, taken);
      // Insert by descending unbiased score (ties: lower id).
      int p = j;
      while (p > 0 && (s[e] > wt[p - 1] || (s[e] == wt[p - 1] && e < id[p - 1]))) {
        id[p] = id[p - 1];
        wt[p] = wt[p - 1];
        --p;
      }
      id[p] = static_cast<int32_t>(e);
      wt[p] = s[e];
    }
    if (gating.normalize) {
      float sum = 0.0f;
      for (int j = 0; j < k; ++j) sum += wt[j];
      sum = sum + 1e-20f;
      for (int j = 0; j < k; ++j) wt[j] = wt[j] / sum;
    }
    if (gating.scale != 1.0f) {
      for (int j = 0; j < k; ++j) wt[j] = wt[j] * gating.scale;
    }
  }
}

}  // namespace

void CpuRouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids, float* weights) {
  if (gating.score == RouterScore::kSigmoid) {
    CpuRouterTopKSigmoid(logits, k, gating, ids, weights);
    return;
  }
  const int64_t n_expert = logits.cols;
  std::vector<char> taken(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < logits.rows; ++t) {
    const float* l = logits.Row(t);
    int32_t* id = ids + t * k;
    float* wt = weights + t * k;
    std::fill(taken.begin(), taken.end(), 0);
    for (int j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < n_expert; ++e) {  // strict '>' keeps the lower id on ties
        if (!taken[e] && (best < 0 || l[e] > l[best])) best = e;
      }
      taken[best] = 1;
      id[j] = static_cast<int32_t>(best);
      wt[j] = l[best];
    }
    // wt[0] is the largest logit of the row.
    const float m = wt[0];
    float sum = 0.0f;
    if (gating.normalize) {  // over the selected, in selection order
      for (int j = 0; j < k; ++j) sum += ExpF(wt[j] - m);
    } else {  // over every expert, in expert order
      for (int64_t e = 0; e < n_expert; ++e) sum += ExpF(l[e] - m);
    }
    for (int j = 0; j < k; ++j) wt[j] = ExpF(wt[j] - m) / sum;
    if (gating.scale != 1.0f) {
      for (int j = 0; j < k; ++j) wt[j] = wt[j] * gating.scale;
    }
  }
}

void CpuSwiGlu(const CpuOpContext& ctx, ConstMat gate, ConstMat up, Mat out) {
  ctx.pool->ParallelFor(out.rows, CpuRowGrain(8 * out.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* g = gate.Row(t);
      const float* u = up.Row(t);
      float* o = out.Row(t);
      ctx.kernels->swiglu(g, u, o, out.cols);
    }
  });
}

void CpuSwiGluOai(const CpuOpContext& ctx, ConstMat gate, ConstMat up, float alpha, float limit,
                  Mat out) {
  ctx.pool->ParallelFor(out.rows, CpuRowGrain(8 * out.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* g = gate.Row(t);
      const float* u = up.Row(t);
      float* o = out.Row(t);
      for (int64_t i = 0; i < out.cols; ++i) o[i] = cpu_math::SwiGluOai(g[i], u[i], alpha, limit);
    }
  });
}

void CpuGeGlu(const CpuOpContext& ctx, ConstMat gate, ConstMat up, Mat out) {
  ctx.pool->ParallelFor(out.rows, CpuRowGrain(8 * out.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* g = gate.Row(t);
      const float* u = up.Row(t);
      float* o = out.Row(t);
      for (int64_t i = 0; i < out.cols; ++i) o[i] = cpu_math::GeGlu(g[i], u[i]);
    }
  });
}

}  // namespace odmoe
