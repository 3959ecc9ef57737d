// Plain scalar references of the backend ops for the backend tests, written
// straight from the op definitions in backend/backend.h and the block layouts
// in tensor/dtype.h, in double precision, sharing no code with any backend
// (only tensor/quant.h: the activation quantizers the MatMul definition names,
// and DequantizeRow for the types decoded here by no code of their own).
//
//   std::vector<double> y = ref::MatMul(w_f32, out, k, x, n);
//   double e = ref::Nmse(got, y);
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace odmoe::ref {

inline double HalfValue(uint16_t h) {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

inline double Bf16Value(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Row `r` (k elements) of a weight stored as `type`, decoded from the block
/// layouts of dtype.h.
inline std::vector<double> DecodeRow(DType type, const uint8_t* row, int64_t k) {
  std::vector<double> out(static_cast<size_t>(k));
  auto u16 = [](const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  };
  for (int64_t i = 0; i < k; ++i) {
    switch (type) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, row + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::kF16:
        out[i] = HalfValue(u16(row + 2 * i));
        break;
      case DType::kBF16:
        out[i] = Bf16Value(u16(row + 2 * i));
        break;
      case DType::kQ8_0: {
        const uint8_t* block = row + (i / 32) * 34;
        out[i] = HalfValue(u16(block)) * static_cast<int8_t>(block[2 + i % 32]);
        break;
      }
      case DType::kQ4_0: {
        const uint8_t* block = row + (i / 32) * 18;
        const int j = static_cast<int>(i % 32);
        const int q = j < 16 ? (block[2 + j] & 0x0f) : (block[2 + j - 16] >> 4);
        out[i] = HalfValue(u16(block)) * (q - 8);
        break;
      }
      default: {
        // The other quantized types: the library's DequantizeRow, which the
        // quant tests hold bit for bit to the gguf package's dequantizers.
        std::vector<float> f(static_cast<size_t>(k));
        DequantizeRow(type, row, f.data(), k);
        return std::vector<double>(f.begin(), f.end());
      }
    }
  }
  return out;
}

/// The activations a MatMul with `type` weights multiplies: x itself for
/// float weights; for quantized weights each row quantized to the type's
/// activation type (Traits(type).vec_dot: Q8_0 or Q8_K, by QuantizeRow, the
/// one routine the MatMul definition names) and decoded again.
inline std::vector<double> MatMulActivations(DType type, const std::vector<float>& x, int64_t n,
                                             int64_t k) {
  const DType act = Traits(type).vec_dot;
  if (act == DType::kF32) return std::vector<double>(x.begin(), x.end());
  std::vector<double> out;
  std::vector<uint8_t> q(RowBytes(act, k));
  for (int64_t t = 0; t < n; ++t) {
    QuantizeRow(act, x.data() + t * k, q.data(), k);
    const std::vector<double> row = DecodeRow(act, q.data(), k);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

/// y[t][o] = sum_i w[o][i] x[t][i], x as in MatMulActivations.
inline std::vector<double> MatMul(DType type, const uint8_t* w, int64_t out, int64_t k,
                                  const std::vector<float>& x_in, int64_t n) {
  const std::vector<double> x = MatMulActivations(type, x_in, n, k);
  std::vector<double> y(static_cast<size_t>(n * out));
  const size_t row_bytes = RowBytes(type, k);
  for (int64_t o = 0; o < out; ++o) {
    const std::vector<double> wr = DecodeRow(type, w + o * row_bytes, k);
    for (int64_t t = 0; t < n; ++t) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += wr[i] * x[t * k + i];
      y[t * out + o] = s;
    }
  }
  return y;
}

inline std::vector<double> RmsNorm(const std::vector<float>& x, int64_t n, int64_t d,
                                   const std::vector<float>& w, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += double(x[t * d + i]) * x[t * d + i];
    const double s = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * s * w[i];
  }
  return y;
}

/// YaRN's inverse frequencies as transformers' `_compute_yarn_parameters`
/// spells them (find_correction_dim / find_correction_range /
/// linear_ramp_factor), in double.
inline std::vector<double> YarnInvFreq(int dim, double base, double factor, double original_ctx,
                                       double beta_fast, double beta_slow, bool truncate) {
  auto find_correction_dim = [&](double num_rotations) {
    return (dim * std::log(original_ctx / (num_rotations * 2 * M_PI))) / (2 * std::log(base));
  };
  double low = find_correction_dim(beta_fast);
  double high = find_correction_dim(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> inv;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    const double extrapolation = 1.0 / pos_freq;
    const double interpolation = 1.0 / (factor * pos_freq);
    const double ramp = std::min(1.0, std::max(0.0, (i - low) / (high - low)));
    const double extrapolation_factor = 1.0 - ramp;
    inv.push_back(interpolation * (1 - extrapolation_factor) +
                  extrapolation * extrapolation_factor);
  }
  return inv;
}

/// RoPE of dims [offset, offset + rope_dims) of each head; inv_freq: the
/// rope_dims / 2 inverse frequencies (empty: base^(-2i/rope_dims)); cos and
/// sin times attention_factor.
inline std::vector<double> Rope(const std::vector<float>& x, int64_t n, int64_t cols, int head_dim,
                                int rope_dims, const std::vector<int32_t>& pos, double base,
                                RopeMode mode, int offset = 0,
                                const std::vector<double>& inv_freq = {},
                                double attention_factor = 1.0) {
  std::vector<double> y(x.begin(), x.end());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < cols / head_dim; ++h) {
      double* v = y.data() + t * cols + h * head_dim + offset;
      for (int i = 0; i < rope_dims / 2; ++i) {
        const double f = inv_freq.empty() ? std::pow(base, -2.0 * i / rope_dims) : inv_freq[i];
        const double theta = pos[t] * f;
        const double c = std::cos(theta) * attention_factor;
        const double s = std::sin(theta) * attention_factor;
        const int a = mode == RopeMode::kInterleaved ? 2 * i : i;
        const int b = mode == RopeMode::kInterleaved ? 2 * i + 1 : i + rope_dims / 2;
        const double va = v[a], vb = v[b];
        v[a] = va * c - vb * s;
        v[b] = va * s + vb * c;
      }
    }
  }
  return y;
}

inline void SoftmaxInPlace(double* v, int64_t n) {
  const double m = *std::max_element(v, v + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (v[i] = std::exp(v[i] - m));
  for (int64_t i = 0; i < n; ++i) v[i] /= s;
}

inline std::vector<double> Softmax(const std::vector<float>& x, int64_t n, int64_t d) {
  std::vector<double> y(x.begin(), x.end());
  for (int64_t t = 0; t < n; ++t) SoftmaxInPlace(y.data() + t * d, d);
  return y;
}

/// The options of Backend::Attention for the reference: `sinks` (n_head
/// logits, empty: none), `window` (0: none), `vd` (0: hd), `ldv` (the V
/// rows' stride, 0: n_head_kv * vd).
struct AttentionExtras {
  std::vector<float> sinks;
  int window = 0;
  int vd = 0;
  int64_t ldv = 0;
};

/// Causal attention as transformers' eager attention: masked scores (the
/// sliding window keeps keys with index > p - window), the sink's logit
/// concatenated to each row, softmax, the sink's column dropped.
inline std::vector<double> Attention(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int64_t n, int n_head,
                                     int n_head_kv, int hd, int pos0, double scale,
                                     const AttentionExtras& extras = {}) {
  const int vd = extras.vd > 0 ? extras.vd : hd;
  const int64_t qc = int64_t(n_head) * hd, kc = int64_t(n_head_kv) * hd;
  const int64_t ldv = extras.ldv > 0 ? extras.ldv : int64_t(n_head_kv) * vd;
  const int64_t oc = int64_t(n_head) * vd;
  std::vector<double> out(static_cast<size_t>(n * oc));
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / (n_head / n_head_kv);
      const int64_t len = pos0 + t + 1;
      std::vector<double> p;  // every key, masked ones at -inf, then the sink
      for (int64_t j = 0; j < len; ++j) {
        double s = 0;
        for (int d = 0; d < hd; ++d) s += double(q[t * qc + h * hd + d]) * k[j * kc + kvh * hd + d];
        const bool visible = extras.window <= 0 || j > pos0 + t - extras.window;
        p.push_back(visible ? s * scale : -INFINITY);
      }
      if (!extras.sinks.empty()) p.push_back(extras.sinks[h]);
      SoftmaxInPlace(p.data(), static_cast<int64_t>(p.size()));
      for (int d = 0; d < vd; ++d) {
        double s = 0;
        for (int64_t j = 0; j < len; ++j) s += p[j] * v[j * ldv + kvh * vd + d];
        out[t * oc + h * vd + d] = s;
      }
    }
  }
  return out;
}

/// Top-k with ties to the lower id; weights = softmax over the selected
/// (`normalize`) or over every expert, then times `scale`.
inline void RouterTopK(const std::vector<float>& logits, int64_t n, int64_t n_expert, int k,
                       bool normalize, double scale, std::vector<int32_t>* ids,
                       std::vector<double>* weights) {
  ids->clear();
  weights->clear();
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    const float* l = logits.data() + t * n_expert;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    std::vector<double> all(l, l + n_expert);
    SoftmaxInPlace(all.data(), n_expert);
    std::vector<double> w;
    for (int j = 0; j < k; ++j) {
      ids->push_back(order[j]);
      w.push_back(all[static_cast<size_t>(order[j])]);
    }
    double sum = 0;
    for (double v : w) sum += v;
    for (double& v : w) v = (normalize ? v / sum : v) * scale;
    weights->insert(weights->end(), w.begin(), w.end());
  }
}

/// DeepSeek-V3's routing as transformers' DeepseekV3TopkRouter computes it,
/// in double: s = sigmoid(l), b = s + bias; groups ranked by the sum of
/// their two largest b (stable: lower group on ties), the other groups'
/// experts at -inf; the k largest b (lower id on ties); weights s of the
/// chosen, in descending order (ties: lower id), normalised by their sum,
/// times `scale`. bias: n_expert values or empty.
inline void RouterTopKSigmoid(const std::vector<float>& logits, int64_t n, int64_t n_expert, int k,
                              bool normalize, double scale, int n_group, int n_group_used,
                              const std::vector<float>& bias, std::vector<int32_t>* ids,
                              std::vector<double>* weights) {
  ids->clear();
  weights->clear();
  const bool limited = n_group > 1 && n_group_used < n_group;
  const int64_t per = limited ? n_expert / n_group : n_expert;
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.data() + t * n_expert;
    std::vector<double> s(static_cast<size_t>(n_expert)), b(static_cast<size_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) {
      s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(l[e])));
      b[e] = s[e] + (bias.empty() ? 0.0 : bias[e]);
    }
    if (limited) {
      std::vector<double> rank(static_cast<size_t>(n_group));
      for (int g = 0; g < n_group; ++g) {
        std::vector<double> v(b.begin() + g * per, b.begin() + (g + 1) * per);
        std::sort(v.begin(), v.end(), std::greater<double>());
        rank[g] = v[0] + v[1];
      }
      std::vector<int> groups(static_cast<size_t>(n_group));
      std::iota(groups.begin(), groups.end(), 0);
      std::stable_sort(groups.begin(), groups.end(),
                       [&](int x, int y) { return rank[x] > rank[y]; });
      for (int r = n_group_used; r < n_group; ++r) {
        for (int64_t e = groups[r] * per; e < (groups[r] + 1) * per; ++e) {
          b[e] = -std::numeric_limits<double>::infinity();
        }
      }
    }
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return b[x] > b[y]; });
    order.resize(static_cast<size_t>(k));
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return s[x] > s[y] || (s[x] == s[y] && x < y); });
    double sum = 0;
    for (int32_t e : order) sum += s[e];
    for (int32_t e : order) {
      ids->push_back(e);
      weights->push_back((normalize ? s[e] / sum : s[e]) * scale);
    }
  }
}

inline std::vector<double> SwiGlu(const std::vector<float>& g, const std::vector<float>& u) {
  std::vector<double> y(g.size());
  for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
  return y;
}

/// gpt-oss's expert activation as transformers' GptOssExperts._apply_gate:
/// gate.clamp(max=limit), up.clamp(-limit, limit),
/// (up + 1) * gate * sigmoid(gate * alpha).
inline std::vector<double> SwiGluOai(const std::vector<float>& gate, const std::vector<float>& up,
                                     double alpha, double limit) {
  std::vector<double> y(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = std::min(double(gate[i]), limit);
    const double u = std::min(std::max(double(up[i]), -limit), limit);
    y[i] = (u + 1) * g * (1.0 / (1.0 + std::exp(-g * alpha)));
  }
  return y;
}

// ---- Error measures ------------------------------------------------------

/// Normalized mean squared error sum (a - b)^2 / sum b^2 (ggml's NMSE).
template <class A, class B>
double Nmse(const std::vector<A>& got, const std::vector<B>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return den > 0 ? num / den : num;
}

/// max |a - b| / max |b|: the largest error relative to the output's scale.
template <class A, class B>
double MaxRelError(const std::vector<A>& got, const std::vector<B>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(double(got[i])) != std::isnan(double(want[i]))) return INFINITY;
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

/// Seeded uniform floats in [lo, hi).
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

}  // namespace odmoe::ref
