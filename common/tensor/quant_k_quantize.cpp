// The K family's weight quantizers (see tensor/quant_k_quantize.h).
//
// Each follows the GGUF ecosystem's reference algorithm (no importance
// matrix) one float operation at a time, in the same order, so that the bytes
// equal those of its reference quantizer: sums run sequentially, every
// product and quotient is one rounded f32 operation (odmoe_tensor builds with
// -ffp-contract=off), rounding to an integer is round-half-to-even
// (NearestInt) and f32 -> f16 is round-to-nearest-even (F32ToF16).
// Non-finite input gives some defined bytes (no undefined behaviour): every
// float-to-int conversion is the bit trick of NearestInt, every index is
// clamped.
#include "tensor/quant_k_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/quant_k_scales.h"
#include "util/fp16.h"

namespace odmoe::quant_internal {
namespace {

constexpr int kN = kSuperBlockElems;
// Groups whose largest |x| is below this quantize to all-zero codes.
constexpr float kGroupMaxEps = 1e-15f;

// Round half to even for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits. Defined (if meaningless) for any v.
inline int NearestInt(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

inline int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// Asymmetric fit x ~ scale * L + min with L in 0..nmax, min <= 0, minimizing
// the weighted error (|diff| if use_mad, else diff^2): the plain max/min
// grid, then nstep + 1 candidate grids (rmin + rdelta * is + nmax) /
// (max - min), each refined by weighted least squares; min is the best fit's
// so far (it moves as better fits are found). Returns scale; *neg_min = -min.
float FitScaleAndMin(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* neg_min, uint8_t* L_try, float rmin, float rdelta, int nstep,
                     bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    // min is the best fit's so far: later grids start from it.
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      L_try[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      float diff = this_scale * static_cast<float>(L_try[i]) + this_min - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      error += weights[i] * diff;
    }
    if (error < best_error) {
      std::copy(L_try, L_try + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// The element of largest magnitude (sign kept, first one wins) and |it|.
inline void SignedMax(int n, const float* x, float* max, float* amax) {
  *max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > *amax) {
      *amax = a;
      *max = x[i];
    }
  }
}

// Symmetric fit for Q3_K: L in -nmax..nmax-1 from -nmax / max, then up to 5
// passes of coordinate descent on the x^2-weighted least-squares scale.
// Returns the scale; L holds l + nmax.
float FitSymmetricQ3(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * li * li;
      const int new_l = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      const float fl = static_cast<float>(new_l);
      slx += w * x[i] * fl;
      sl2 += w * fl * fl;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Symmetric fit for Q6_K: L in -nmax..nmax-1, the best of 19 grids
// -(nmax + 0.1 is) / max by the x^2-weighted least-squares gain. Returns the
// scale; L holds l + nmax.
float FitSymmetricQ6(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  SignedMax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Largest of a non-negative scale list (strictly greater wins).
inline float MaxOf(const float* v, int n) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (v[j] > m) m = v[j];
  }
  return m;
}

void QuantizeQ2KBlock(const float* x, BlockQ2K& y) {
  uint8_t L[kN], L_try[16];
  float weights[16], scales[16], mins[16];
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = FitScaleAndMin(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], L_try, -0.5f, 0.1f,
                               15, true);
  }
  const float max_scale = MaxOf(scales, 16);
  const float max_min = MaxOf(mins, 16);
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
    y.d = F32ToF16(max_scale / 15.0f);
  } else {
    std::fill(y.scales, y.scales + 16, 0);
    y.d = F32ToF16(0.0f);
  }
  if (max_min > 0) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) {
      const auto l = static_cast<uint32_t>(NearestInt(iscale * mins[j]));
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | (l << 4));
    }
    y.dmin = F32ToF16(max_min / 15.0f);
  } else {
    y.dmin = F32ToF16(0.0f);
  }
  // Codes again from the stored (rounded) scales; sub-blocks with d = 0 keep
  // the fit's codes.
  const float d_all = F16ToF32(y.d);
  const float dmin_all = F16ToF32(y.dmin);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(y.scales[j] & 0x0f);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(y.scales[j] >> 4);
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      L[i] = static_cast<uint8_t>(Clamp(NearestInt((x[i] + dm) / d), 0, 3));
    }
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y.qs[32 * h + l] =
          static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
  }
}

void QuantizeQ3KBlock(const float* x, BlockQ3K& y) {
  int8_t L[kN];
  float scales[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = FitSymmetricQ3(16, 4, x + 16 * j, L + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  int8_t sc[16];
  std::fill(sc, sc + 16, -32);  // all-zero scale bytes when every fit is 0
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      sc[j] =
          static_cast<int8_t>(Clamp(static_cast<int8_t>(NearestInt(iscale * scales[j])), -32, 31));
    }
    y.d = F32ToF16(1.0f / iscale);
  } else {
    y.d = F32ToF16(0.0f);
  }
  PackQ3KScales(sc, y.scales);
  const float d_all = F16ToF32(y.d);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      L[i] = static_cast<int8_t>(Clamp(NearestInt(x[i] / d), -4, 3) + 4);
    }
  }
  // High bit of element 32 m + l (m = 0..7) at bit m of hmask[l].
  std::fill(y.hmask, y.hmask + 32, 0);
  for (int i = 0; i < kN; ++i) {
    if (L[i] > 3) {
      y.hmask[i % 32] = static_cast<uint8_t>(y.hmask[i % 32] | (1u << (i / 32)));
      L[i] = static_cast<int8_t>(L[i] - 4);
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y.qs[32 * h + l] =
          static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
  }
}

// Q4_K (nmax 15) and Q5_K (nmax 31): 8 asymmetric sub-block fits with
// weights av_x + |x|, 6-bit scales and mins, then codes from the stored
// scales. Writes d, dmin, scales and the codes L (0..nmax).
void QuantizeScaleMin32(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                        uint16_t* dmin_out, uint8_t packed[kKScaleBytes], uint8_t L[kN]) {
  uint8_t L_try[32];
  float weights[32], scales[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xj[l]);
    scales[j] = FitScaleAndMin(32, nmax, xj, weights, L + 32 * j, &mins[j], L_try, rmin, 0.1f,
                               nstep, false);
  }
  const float max_scale = MaxOf(scales, 8);
  const float max_min = MaxOf(mins, 8);
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    mn[j] = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
  }
  PackQ4KScalesMins(sc, mn, packed);
  *d_out = F32ToF16(max_scale / 63.0f);
  *dmin_out = F32ToF16(max_min / 63.0f);
  const float d_all = F16ToF32(*d_out);
  const float dmin_all = F16ToF32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(mn[j]);
    for (int i = 32 * j; i < 32 * j + 32; ++i) {
      L[i] = static_cast<uint8_t>(Clamp(NearestInt((x[i] + dm) / d), 0, nmax));
    }
  }
}

void QuantizeQ4KBlock(const float* x, BlockQ4K& y) {
  uint8_t L[kN];
  QuantizeScaleMin32(x, 15, -1.0f, 20, &y.d, &y.dmin, y.scales, L);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      y.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
  }
}

void QuantizeQ5KBlock(const float* x, BlockQ5K& y) {
  uint8_t L[kN];
  QuantizeScaleMin32(x, 31, -0.5f, 15, &y.d, &y.dmin, y.scales, L);
  std::fill(y.qh, y.qh + 32, 0);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * c + l];
      const int hi = L[64 * c + 32 + l];
      y.qh[l] = static_cast<uint8_t>(y.qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      y.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
    }
  }
}

void QuantizeQ6KBlock(const float* x, BlockQ6K& y) {
  int8_t L[kN];
  float scales[16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = FitSymmetricQ6(16, 32, x + 16 * j, L + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > max_abs_scale) {
      max_abs_scale = a;
      max_scale = scales[j];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof(y));
    return;
  }
  const float iscale = -128.0f / max_scale;
  y.d = F32ToF16(1.0f / iscale);
  for (int j = 0; j < 16; ++j) {
    y.scales[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[j])));
  }
  const float d_all = F16ToF32(y.d);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(y.scales[j]);
    if (d == 0.0f) continue;
    for (int i = 16 * j; i < 16 * j + 16; ++i) {
      L[i] = static_cast<int8_t>(Clamp(NearestInt(x[i] / d), -32, 31) + 32);
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y.ql[64 * h + l] = static_cast<uint8_t>((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
      y.ql[64 * h + l + 32] =
          static_cast<uint8_t>((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
      y.qh[32 * h + l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                              ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

// Index of the kIq4nlValues entry nearest to v (ties to the lower one).
inline int NearestIq4Index(float v) {
  const int8_t* values = kIq4nlValues;
  if (v <= values[0]) return 0;
  if (v >= values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(values[hi - 1]) < static_cast<float>(values[hi]) - v ? hi - 1 : hi;
}

// One IQ4_XS sub-block of 32: the x^2-weighted least-squares scale of the
// best of the grids 1 / d = (itry - 127) / max, itry = -7..7, and the start
// -max / -127.
float FitIq4Scale(const float* x) {
  float max, amax;
  SignedMax(32, x, &max, &amax);
  if (amax < kGroupMaxEps) return 0.0f;
  const auto value_at = [](int l) { return static_cast<float>(kIq4nlValues[l]); };
  float d = -max / value_at(0);
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float q = value_at(NearestIq4Index(id * x[j]));
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int itry = -7; itry <= 7; ++itry) {
    id = static_cast<float>(itry + kIq4nlValues[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = value_at(NearestIq4Index(id * x[j]));
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void QuantizeIq4XsBlock(const float* x, BlockIq4Xs& y) {
  float scales[8];
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int j = 0; j < 8; ++j) {
    scales[j] = FitIq4Scale(x + 32 * j);
    const float a = std::fabs(scales[j]);
    if (a > amax_scale) {
      amax_scale = a;
      max_scale = scales[j];
    }
  }
  const float d = -max_scale / 32.0f;  // -0 for an all-zero block, stored as such
  y.d = F32ToF16(d);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int8_t sc[8];
  for (int j = 0; j < 8; ++j) {
    const int l = Clamp(NearestInt(id * scales[j]), -32, 31);
    sc[j] = static_cast<int8_t>(l);
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    const float* xj = x + 32 * j;
    for (int t = 0; t < 16; ++t) {
      const int lo = NearestIq4Index(idl * xj[t]);
      const int hi = NearestIq4Index(idl * xj[t + 16]);
      y.qs[16 * j + t] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
  PackIq4XsScales(sc, &y.scales_h, y.scales_l);
}

}  // namespace

void QuantizeQ2K(const float* src, BlockQ2K* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeQ2KBlock(src + s * kN, dst[s]);
}
void QuantizeQ3K(const float* src, BlockQ3K* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeQ3KBlock(src + s * kN, dst[s]);
}
void QuantizeQ4K(const float* src, BlockQ4K* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeQ4KBlock(src + s * kN, dst[s]);
}
void QuantizeQ5K(const float* src, BlockQ5K* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeQ5KBlock(src + s * kN, dst[s]);
}
void QuantizeQ6K(const float* src, BlockQ6K* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeQ6KBlock(src + s * kN, dst[s]);
}
void QuantizeIq4Xs(const float* src, BlockIq4Xs* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) QuantizeIq4XsBlock(src + s * kN, dst[s]);
}

}  // namespace odmoe::quant_internal
