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
//
// Speed without changing a bit: the sub-block fits (the expensive part, many
// candidate grids per sub-block) run 8 sub-blocks side by side in the lanes
// of GCC vector types, each lane doing exactly the scalar operations of its
// sub-block in the reference order; where the CPU has AVX2 a clone of those
// functions is picked at load time (target_clones). Verified byte-identical
// to llama.cpp with and without the clones (-DODMOE_QUANT_NO_CLONES).
#include "tensor/quant_k_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/quant_k_scales.h"
#include "util/fp16.h"

// The vector types below only travel between functions of this file (all
// inlined or compiled with the same target), never across an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

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

// The lane loops also get an AVX2 version chosen at load time where the CPU
// has it: the same IEEE operations lane for lane (no FMA: contraction is
// off), so the bytes never depend on the machine. Not under ThreadSanitizer:
// the load-time resolver would run instrumented before TSan starts (a crash
// while the program is being loaded).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(ODMOE_QUANT_NO_CLONES) && !defined(__SANITIZE_THREAD__)
#define ODMOE_QUANT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ODMOE_QUANT_CLONES
#endif

inline int Clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// Asymmetric fit x ~ scale * L + min with L in 0..nmax, min <= 0, minimizing
// the weighted error (|diff| if use_mad, else diff^2): the plain max/min
// grid, then nstep + 1 candidate grids (rmin + rdelta * is + nmax) /
// (max - min), each refined by weighted least squares; min is the best fit's
// so far (it moves as better fits are found).
//
// 8 sub-blocks of n elements are fitted side by side, each exactly as
// alone (its sums in element order): x and weights are transposed,
// x[i * 8 + k] is element i of sub-block k, and so is L. Per lane:
// scale[k], neg_min[k] = -min. The lanes give the CPU independent work (the
// sequential sums of one sub-block are latency-bound) and vectorize.
// 8 lanes of floats / ints (GCC vector extensions: every operation is
// lane-wise and exactly the scalar one).
typedef float FV __attribute__((vector_size(32)));
typedef int32_t IV __attribute__((vector_size(32)));

// The lane helpers are always inlined, so that they take the instruction set
// of the (cloned) function that calls them.
#define ODMOE_LANES_INLINE inline __attribute__((always_inline))

// fabs lane-wise: the sign bit cleared.
ODMOE_LANES_INLINE FV AbsLanes(FV v) {
  IV bits;
  std::memcpy(&bits, &v, sizeof(bits));
  bits &= 0x7fffffff;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// Clamp(NearestInt(v), lo, hi) lane-wise.
ODMOE_LANES_INLINE IV NearestIntClamped(FV v, int lo, int hi) {
  const IV izero = {};
  const FV shifted = v + 12582912.0f;
  IV bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  IV l = (bits & 0x007fffff) - 0x00400000;
  const IV vlo = izero + lo, vhi = izero + hi;  // (named: GCC then emits min / max)
  l = l < vlo ? vlo : l;
  return l > vhi ? vhi : l;
}

// Loads n lane groups of x (x[i * 8 + k]: element i of sub-block k) into xs,
// their squares into w, and per lane the element of largest magnitude (sign
// kept, the first one on ties) and its magnitude.
ODMOE_LANES_INLINE void LoadWithSignedMax(const float* x, int n, FV* xs, FV* w, FV* max_out,
                                          FV* amax_out) {
  FV max = {}, amax = {};  // locals: the outputs could alias xs and w
  for (int i = 0; i < n; ++i) {
    std::memcpy(&xs[i], x + 8 * i, sizeof(FV));
    const FV a = AbsLanes(xs[i]);
    const IV larger = a > amax;
    max = larger ? xs[i] : max;
    amax = larger ? a : amax;
    w[i] = xs[i] * xs[i];
  }
  *max_out = max;
  *amax_out = amax;
}

template <int kElems, bool kUseMad>
ODMOE_QUANT_CLONES void FitScaleAndMin(int nmax, const float* x, const float* weights, int32_t* L,
                                       float* scale_out, float* neg_min, float rmin, float rdelta,
                                       int nstep) {
  constexpr int kLanes = 8;
  constexpr int n = kElems;
  const auto load = [](const float* p) {
    FV v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  const FV zero = {};
  const auto codes = [&](FV v) { return NearestIntClamped(v, 0, nmax); };
  const auto error_term = [](FV diff) {
    if constexpr (kUseMad) {
      return AbsLanes(diff);
    } else {
      return diff * diff;
    }
  };

  FV min = load(x), max = min, sum_w = load(weights), sum_x = sum_w * min;
  for (int i = 1; i < n; ++i) {
    const FV xi = load(x + i * kLanes);
    const FV w = load(weights + i * kLanes);
    min = xi < min ? xi : min;
    max = xi > max ? xi : max;
    sum_w += w;
    sum_x += w * xi;
  }
  min = min > zero ? zero : min;
  const IV flat = max == min;  // all codes 0, scale 0 (the lane's results are replaced)
  const FV flat_min = min;
  FV iscale = (zero + static_cast<float>(nmax)) / (max - min);
  FV scale = (zero + 1.0f) / iscale;
  FV best_error = zero;
  for (int i = 0; i < n; ++i) {
    const FV xi = load(x + i * kLanes);
    const IV l = codes(iscale * (xi - min));
    std::memcpy(&L[i * kLanes], &l, sizeof(l));
    const FV diff = scale * __builtin_convertvector(l, FV) + min - xi;
    best_error += load(weights + i * kLanes) * error_term(diff);
  }
  IV L_try[n];
  for (int is = 0; is <= nstep; ++is) {
    FV sum_l = zero, sum_l2 = zero, sum_xl = zero;
    iscale =
        (zero + (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax))) / (max - min);
    for (int i = 0; i < n; ++i) {
      const FV xi = load(x + i * kLanes);
      const IV l = codes(iscale * (xi - min));
      L_try[i] = l;
      const FV w = load(weights + i * kLanes);
      const FV fl = __builtin_convertvector(l, FV);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * xi;
    }
    const FV det = sum_w * sum_l2 - sum_l * sum_l;
    FV this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    FV this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    const IV positive_min = this_min > zero;
    this_min = positive_min ? zero : this_min;
    this_scale = positive_min ? sum_xl / sum_l2 : this_scale;
    FV error = zero;
    for (int i = 0; i < n; ++i) {
      const FV diff =
          this_scale * __builtin_convertvector(L_try[i], FV) + this_min - load(x + i * kLanes);
      error += load(weights + i * kLanes) * error_term(diff);
    }
    const IV take = (det > zero) & (error < best_error);
    best_error = take ? error : best_error;
    scale = take ? this_scale : scale;
    min = take ? this_min : min;
    for (int i = 0; i < n; ++i) {
      IV cur;
      std::memcpy(&cur, &L[i * kLanes], sizeof(cur));
      cur = take ? L_try[i] : cur;
      std::memcpy(&L[i * kLanes], &cur, sizeof(cur));
    }
  }
  for (int k = 0; k < kLanes; ++k) {
    scale_out[k] = flat[k] ? 0.0f : scale[k];
    neg_min[k] = flat[k] ? -flat_min[k] : -min[k];
    if (flat[k]) {
      for (int i = 0; i < n; ++i) L[i * kLanes + k] = 0;
    }
  }
}

// dst[i * lanes + k] = src[k * n + i]: sub-block k's element i, lane-major.
template <typename T>
inline void ToLanes(const T* src, int n, int lanes, T* dst) {
  for (int k = 0; k < lanes; ++k) {
    for (int i = 0; i < n; ++i) dst[i * lanes + k] = src[k * n + i];
  }
}

inline void FromLanes(const int32_t* src, int n, int lanes, uint8_t* dst) {
  for (int k = 0; k < lanes; ++k) {
    for (int i = 0; i < n; ++i) dst[k * n + i] = static_cast<uint8_t>(src[i * lanes + k]);
  }
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

// Symmetric fit for Q6_K: L in -32..31, the best of 19 grids
// -(32 + 0.1 is) / max by the x^2-weighted least-squares gain; L holds
// l + 32. 8 sub-blocks of 16 side by side (x and L transposed as for
// FitScaleAndMin); scale_out[k] is sub-block k's scale, 0 (and codes 0) for
// a sub-block whose largest |x| is below kGroupMaxEps.
ODMOE_QUANT_CLONES void FitSymmetricQ6(const float* x, int32_t* L, float* scale_out) {
  constexpr int n = 16, nmax = 32;
  const FV zero = {};
  const IV izero = {};
  FV xs[n], w[n], max, amax;
  LoadWithSignedMax(x, n, xs, w, &max, &amax);
  const auto codes = [&](FV v) { return NearestIntClamped(v, -nmax, nmax - 1); };
  IV l_best[n], l_try[n];
  FV sumlx = zero, suml2 = zero;
  FV iscale = (zero + static_cast<float>(-nmax)) / max;
  for (int i = 0; i < n; ++i) {
    l_best[i] = codes(iscale * xs[i]);
    const FV fl = __builtin_convertvector(l_best[i], FV);
    sumlx += w[i] * xs[i] * fl;
    suml2 += w[i] * fl * fl;
  }
  FV scale = suml2 != zero ? sumlx / suml2 : zero;
  FV best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(zero + (static_cast<float>(nmax) + 0.1f * static_cast<float>(is))) / max;
    sumlx = suml2 = zero;
    for (int i = 0; i < n; ++i) {
      l_try[i] = codes(iscale * xs[i]);
      const FV fl = __builtin_convertvector(l_try[i], FV);
      sumlx += w[i] * xs[i] * fl;
      suml2 += w[i] * fl * fl;
    }
    const IV take = (suml2 > zero) & (sumlx * sumlx > best * suml2);
    const FV new_scale = sumlx / suml2;
    scale = take ? new_scale : scale;
    best = take ? new_scale * sumlx : best;
    for (int i = 0; i < n; ++i) l_best[i] = take ? l_try[i] : l_best[i];
  }
  const IV empty = amax < zero + kGroupMaxEps;
  for (int i = 0; i < n; ++i) {
    const IV code = empty ? izero : l_best[i] + nmax;
    std::memcpy(L + 8 * i, &code, sizeof(code));
  }
  for (int k = 0; k < 8; ++k) scale_out[k] = empty[k] ? 0.0f : scale[k];
}

// Largest of a non-negative scale list (strictly greater wins).
inline float MaxOf(const float* v, int n) {
  float m = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (v[j] > m) m = v[j];
  }
  return m;
}

// The codes of a sub-block of n elements again, from its stored (rounded)
// scale d != 0 and min dm: Clamp(NearestInt((x + dm) / d), 0, nmax).
inline void CodesWithMin(const float* x, int n, float d, float dm, int nmax, uint8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(Clamp(NearestInt((x[i] + dm) / d), 0, nmax));
  }
}

// The same for a symmetric type: Clamp(NearestInt(x / d), -nmax, nmax - 1)
// + nmax.
inline void CodesSymmetric(const float* x, int n, float d, int nmax, int8_t* L) {
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<int8_t>(Clamp(NearestInt(x[i] / d), -nmax, nmax - 1) + nmax);
  }
}

// 2-bit codes (Q2_K, Q3_K's low bits), four to a byte: byte 32 h + l holds
// the codes of elements 128 h + l + 32 m at bits 2 m, m = 0..3.
template <typename Code>
void Pack2BitCodes(const Code* L, uint8_t qs[64]) {
  for (int h = 0; h < 2; ++h) {
    const Code* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] =
          static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
  }
}

void QuantizeQ2KBlock(const float* x, BlockQ2K& y) {
  uint8_t L[kN];
  int32_t lanes_L[kN];
  float weights[kN], lanes_x[kN], lanes_w[kN], scales[16], mins[16];
  for (int i = 0; i < kN; ++i) weights[i] = std::fabs(x[i]);
  for (int g = 0; g < 2; ++g) {  // sub-blocks 8 g .. 8 g + 7
    ToLanes(x + 128 * g, 16, 8, lanes_x);
    ToLanes(weights + 128 * g, 16, 8, lanes_w);
    FitScaleAndMin<16, true>(3, lanes_x, lanes_w, lanes_L, scales + 8 * g, mins + 8 * g, -0.5f,
                             0.1f, 15);
    FromLanes(lanes_L, 16, 8, L + 128 * g);  // codes 0..3
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
    CodesWithMin(x + 16 * j, 16, d, dm, 3, L + 16 * j);
  }
  Pack2BitCodes(L, y.qs);
}

void QuantizeQ3KBlock(const float* x, BlockQ3K& y) {
  int8_t L[kN];
  float scales[16];
  for (int j = 0; j < 16; ++j) scales[j] = FitSymmetricQ3(16, 4, x + 16 * j, L + 16 * j);
  float max_scale, amax;
  SignedMax(16, scales, &max_scale, &amax);
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
    if (d != 0.0f) CodesSymmetric(x + 16 * j, 16, d, 4, L + 16 * j);
  }
  // High bit of element 32 m + l (m = 0..7) at bit m of hmask[l].
  std::fill(y.hmask, y.hmask + 32, 0);
  for (int i = 0; i < kN; ++i) {
    if (L[i] > 3) {
      y.hmask[i % 32] = static_cast<uint8_t>(y.hmask[i % 32] | (1u << (i / 32)));
      L[i] = static_cast<int8_t>(L[i] - 4);
    }
  }
  Pack2BitCodes(L, y.qs);
}

// Q4_K (nmax 15) and Q5_K (nmax 31): 8 asymmetric sub-block fits with
// weights av_x + |x|, 6-bit scales and mins, then codes from the stored
// scales. Writes d, dmin, scales and the codes L (0..nmax).
void QuantizeScaleMin32(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                        uint16_t* dmin_out, uint8_t packed[kKScaleBytes], uint8_t L[kN]) {
  float weights[kN], lanes_x[kN], lanes_w[kN], scales[8], mins[8];
  int32_t lanes_L[kN];
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[32 * j + l] = av_x + std::fabs(xj[l]);
  }
  ToLanes(x, 32, 8, lanes_x);
  ToLanes(weights, 32, 8, lanes_w);
  FitScaleAndMin<32, false>(nmax, lanes_x, lanes_w, lanes_L, scales, mins, rmin, 0.1f, nstep);
  FromLanes(lanes_L, 32, 8, L);
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
    CodesWithMin(x + 32 * j, 32, d, dm, nmax, L + 32 * j);
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
  float scales[16], lanes_x[128];
  int32_t lanes_L[128];
  for (int g = 0; g < 2; ++g) {  // sub-blocks 8 g .. 8 g + 7
    ToLanes(x + 128 * g, 16, 8, lanes_x);
    FitSymmetricQ6(lanes_x, lanes_L, scales + 8 * g);
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 16; ++i)
        L[128 * g + 16 * k + i] = static_cast<int8_t>(lanes_L[8 * i + k]);
    }
  }
  float max_scale, max_abs_scale;
  SignedMax(16, scales, &max_scale, &max_abs_scale);
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
    if (d != 0.0f) CodesSymmetric(x + 16 * j, 16, d, 32, L + 16 * j);
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

// kIq4nlValues as floats.
constexpr float kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

// Index of the kIq4nlValues entry nearest to v: lo = the largest index with
// level[lo] <= v, then the nearer of lo and lo + 1 by the float distances,
// ties to lo + 1; v <= level[0] gives 0, v >= level[15] (or NaN) 15. The
// count of levels <= v is branchless: the codes are data-dependent, so a
// branching search would mispredict.
inline int NearestIq4Index(float v) {
  if (v <= kIq4Levels[0]) return 0;
  if (!(v < kIq4Levels[15])) return 15;
  int lo = 0;
  for (int j = 1; j < 15; ++j) lo += kIq4Levels[j] <= v ? 1 : 0;
  return v - kIq4Levels[lo] < kIq4Levels[lo + 1] - v ? lo : lo + 1;
}

// Between levels a = level[j] and b = level[j + 1] NearestIq4Index picks b
// exactly when !(v - a < b - v) in float arithmetic; both differences are
// monotone in v, so that holds from one float t_j on. The 15 thresholds,
// found once by bisection over the ordered float bit patterns.
struct Iq4Thresholds {
  float t[15];
  Iq4Thresholds() {
    const auto key = [](float f) {
      uint32_t b;
      std::memcpy(&b, &f, sizeof(b));
      return (b >> 31) ? -static_cast<int64_t>(b & 0x7fffffffu) : static_cast<int64_t>(b);
    };
    const auto from_key = [](int64_t k) {
      const uint32_t b = k < 0 ? 0x80000000u | static_cast<uint32_t>(-k) : static_cast<uint32_t>(k);
      float f;
      std::memcpy(&f, &b, sizeof(f));
      return f;
    };
    for (int j = 0; j < 15; ++j) {
      const float a = kIq4Levels[j], b = kIq4Levels[j + 1];
      int64_t lo = key(a), hi = key(b);  // picks a at lo, b at hi
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        const float v = from_key(mid);
        (v - a < b - v ? lo : hi) = mid;
      }
      t[j] = from_key(hi);
    }
  }
};

// kIq4Levels[NearestIq4Index(v)] lane-wise without branches or lookups;
// NaN gives level[15] as there.
inline FV NearestIq4Levels(FV v, const float* thresholds) {
  const FV zero = {};
  FV q = zero + kIq4Levels[0];
  for (int j = 0; j < 15; ++j) q = v >= zero + thresholds[j] ? zero + kIq4Levels[j + 1] : q;
  return v == v ? q : zero + kIq4Levels[15];
}

// The IQ4_XS sub-block scales, the 8 sub-blocks side by side (x transposed
// as for FitScaleAndMin: x[i * 8 + k] is element i of sub-block k). Per
// sub-block: the x^2-weighted least-squares scale of the best of the grids
// 1 / d = (itry - 127) / max, itry = -7..7, and the start -max / -127; 0 for
// a sub-block whose largest |x| is below kGroupMaxEps.
ODMOE_QUANT_CLONES void FitIq4Scales(const float* x, float* scale_out) {
  static const Iq4Thresholds kThresholds;
  const float* thresholds = kThresholds.t;
  const FV zero = {};
  FV max, amax, xs[32], w[32];
  LoadWithSignedMax(x, 32, xs, w, &max, &amax);
  FV sumqx, sumq2;
  const auto sums = [&](FV id) {
    sumqx = sumq2 = zero;
    for (int i = 0; i < 32; ++i) {
      const FV q = NearestIq4Levels(id * xs[i], thresholds);
      sumqx += w[i] * q * xs[i];
      sumq2 += w[i] * q * q;
    }
  };
  sums((zero + 1.0f) / (-max / (zero + kIq4Levels[0])));
  FV d = sumq2 > zero ? sumqx / sumq2 : zero;
  FV best = d * sumqx;
  for (int itry = -7; itry <= 7; ++itry) {
    sums((zero + static_cast<float>(itry + kIq4nlValues[0])) / max);
    const IV better = (sumq2 > zero) & (sumqx * sumqx > best * sumq2);
    const FV new_d = sumqx / sumq2;
    d = better ? new_d : d;
    best = better ? new_d * sumqx : best;
  }
  for (int k = 0; k < 8; ++k) scale_out[k] = amax[k] < kGroupMaxEps ? 0.0f : d[k];
}

void QuantizeIq4XsBlock(const float* x, BlockIq4Xs& y) {
  float scales[8], lanes_x[kN];
  ToLanes(x, 32, 8, lanes_x);
  FitIq4Scales(lanes_x, scales);
  float max_scale, amax_scale;
  SignedMax(8, scales, &max_scale, &amax_scale);
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

// Super-block s of src (kN floats) into dst[s], for each of n_blocks.
template <auto kQuantizeBlock, typename Block>
void QuantizeBlocks(const float* src, Block* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s) kQuantizeBlock(src + s * kN, dst[s]);
}

}  // namespace

void QuantizeQ2K(const float* src, BlockQ2K* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeQ2KBlock>(src, dst, n_blocks);
}
void QuantizeQ3K(const float* src, BlockQ3K* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeQ3KBlock>(src, dst, n_blocks);
}
void QuantizeQ4K(const float* src, BlockQ4K* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeQ4KBlock>(src, dst, n_blocks);
}
void QuantizeQ5K(const float* src, BlockQ5K* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeQ5KBlock>(src, dst, n_blocks);
}
void QuantizeQ6K(const float* src, BlockQ6K* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeQ6KBlock>(src, dst, n_blocks);
}
void QuantizeIq4Xs(const float* src, BlockIq4Xs* dst, int64_t n_blocks) {
  QuantizeBlocks<QuantizeIq4XsBlock>(src, dst, n_blocks);
}

}  // namespace odmoe::quant_internal
