// The arithmetic of the CUDA kernels, written once for the device and the
// host: every function here is `__host__ __device__` under nvcc and a plain
// inline function under a host compiler, so the host tests
// (tests/cuda/cuda_numerics*_test.cpp) check, bit for bit and without a GPU,
// that the kernels' building blocks equal the CPU backend's reference
// (cpu_backend.h, "The canonical summation order").
//
//   using namespace odmoe::cuda_numerics;
//   float lanes[16];
//   for (int l = 0; l < 16; ++l) lanes[l] = LaneDot<DType::kF16>(w_row, x, k, l);
//   float y = TreeReduce16(lanes);        // == CpuBackend's MatMul element
//
// What the kernels do with these pieces (one "lane" = one thread of a
// half-warp; the tree is spelled with __shfl_down_sync in the same order):
//   * float MatMul, RmsNorm, attention scores: LaneDot + TreeReduce16;
//   * block32 MatMul (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4;
//     cuda_numerics_block32.h): QuantizeBlockQ8_0 per activation block, then
//     LaneQDot (exact integer block sums, fma per block) + TreeReduce16;
//   * K-family MatMul (Q2_K .. Q6_K, IQ4_XS; cuda_numerics_kquant.h):
//     QuantizeBlockQ8_K per activation super-block, then LaneKDot (exact
//     int32 sub-block sums, fma per super-block) + TreeReduce16;
//   * GetRows: DequantElement (cuda_numerics_dequant.h), DequantizeRow's bits;
//   * softmax and attention denominators: LaneSum + TreeReduce16;
//   * SwiGLU, router weights: Silu, SwiGluOai, ExpF, RouterTopKRow;
//   * RoPE: RopeCosSin and RopeRotate on backend/rope.h's frequency table;
//   * attention: the scores as a float MatMul, the softmax as Softmax's, the
//     sink's term added after the lane sum (AttentionDenominator).
//
// Floating point rules. Products and sums are written as plain `*`, `+`, `-`
// and must not be fused: the CUDA target is compiled with --fmad=false (and
// the host side with -ffp-contract=off); fused multiply-adds are explicit
// (Fma). Division and sqrt are IEEE round-to-nearest on both sides (nvcc's
// defaults -prec-div=true -prec-sqrt=true; never --use_fast_math).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define ODMOE_HD __host__ __device__ __forceinline__
#else
#define ODMOE_HD inline
#endif
// Full unrolling of a loop with a compile-time trip count in device code
// (keeps small arrays in registers); nothing on the host.
#if defined(__CUDA_ARCH__)
#define ODMOE_UNROLL _Pragma("unroll")
#else
#define ODMOE_UNROLL
#endif

namespace odmoe::cuda_numerics {

// ---- Bits and basic operations -----------------------------------------

ODMOE_HD uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

ODMOE_HD float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// fma(a, b, c) with one rounding.
ODMOE_HD float Fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

ODMOE_HD float Sqrt(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

ODMOE_HD bool IsNan(float x) { return x != x; }
ODMOE_HD float Abs(float x) { return BitsFloat(FloatBits(x) & 0x7fffffffu); }
/// max(a, b) as the CPU's `a > b ? a : b` (NaN in b is skipped).
ODMOE_HD float MaxSkipNan(float a, float b) { return b > a ? b : a; }

/// The 16-bit word at p (2-byte aligned).
ODMOE_HD uint16_t LoadU16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

/// The little-endian 32-bit word at p, which is only 2-byte aligned.
ODMOE_HD uint32_t LoadU32Even(const uint8_t* p) {
  return LoadU16(p) | (static_cast<uint32_t>(LoadU16(p + 2)) << 16);
}

/// -infinity, usable in device code.
ODMOE_HD float NegInfinity() { return BitsFloat(0xff800000u); }

// ---- 16-bit floats (exact widening; F32ToF16 rounds to nearest even) ------

ODMOE_HD float F16ToF32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in float.
  const float v = static_cast<float>(mant) * BitsFloat(0x33800000u);  // 2^-24
  return BitsFloat(FloatBits(v) | sign);
#endif
}

ODMOE_HD uint16_t F32ToF16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // quiet NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // inf
  if (abs < 0x38800000u) {  // subnormal result: round abs / 2^-24 to an integer
    const float scaled = BitsFloat(abs) * BitsFloat(0x4b800000u);  // * 2^24, exact
    // Round half to even through the float adder: 2^23 + v rounds v to an
    // integer (v < 2^10 here), then subtract 2^23 back (exact).
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded));
  }
  uint32_t half = (abs >> 13) - (112u << 10);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
#endif
}

ODMOE_HD float BF16ToF32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

/// Element i of a row of an unquantized type (F32, F16, BF16).
template <DType T>
ODMOE_HD float LoadFloat(const void* row, int64_t i) {
  if constexpr (T == DType::kF32) {
    return static_cast<const float*>(row)[i];
  } else if constexpr (T == DType::kF16) {
    return F16ToF32(static_cast<const uint16_t*>(row)[i]);
  } else {
    static_assert(T == DType::kBF16, "LoadFloat: unquantized types only");
    return BF16ToF32(static_cast<const uint16_t*>(row)[i]);
  }
}

// ---- exp and silu: cpu_math::ExpF, operation for operation ----------------

inline constexpr float kExpMax = 88.7228394f;
inline constexpr float kExpMin = -103.972084f;
inline constexpr float kExpLn2Hi = 0.693145751953125f;
inline constexpr float kExpLn2Lo = 1.42860677e-06f;
inline constexpr float kExpP7 = 1.0f / 5040.0f;
inline constexpr float kExpP6 = 1.0f / 720.0f;
inline constexpr float kExpP5 = 1.0f / 120.0f;
inline constexpr float kExpP4 = 1.0f / 24.0f;
inline constexpr float kExpP3 = 1.0f / 6.0f;

/// 2^e for -126 <= e <= 127.
ODMOE_HD float Pow2(int e) { return BitsFloat(static_cast<uint32_t>(e + 127) << 23); }

/// e^x, bit-identical to cpu_math::ExpF.
ODMOE_HD float ExpF(float x) {
  if (IsNan(x)) return x;
  if (x > kExpMax) return BitsFloat(0x7f800000u);
  if (x < kExpMin) return 0.0f;
  const float t = x * 1.44269504f;
  const float n = static_cast<float>(static_cast<int>(t + (t < 0.0f ? -0.5f : 0.5f)));
  const float r = (x - n * kExpLn2Hi) - n * kExpLn2Lo;
  float p = kExpP7;
  p = p * r + kExpP6;
  p = p * r + kExpP5;
  p = p * r + kExpP4;
  p = p * r + kExpP3;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int ni = static_cast<int>(n);
  const int n1 = ni / 2;
  return p * Pow2(n1) * Pow2(ni - n1);
}

/// silu(x) = x / (1 + e^-x), as cpu_math::Silu.
ODMOE_HD float Silu(float x) { return x / (1.0f + ExpF(-x)); }

/// tanh(y) = 1 - 2 / (ExpF(2y) + 1), as cpu_math::TanhF.
ODMOE_HD float TanhF(float y) { return 1.0f - 2.0f / (ExpF(2.0f * y) + 1.0f); }

/// GeGLU of one element, as cpu_math::GeGlu.
ODMOE_HD float GeGlu(float gate, float up) {
  const float inner = 0.7978845608028654f * (gate + 0.044715f * (gate * gate * gate));
  return (0.5f * gate * (1.0f + TanhF(inner))) * up;
}

/// gpt-oss's clamped SwiGLU of one element, as cpu_math::SwiGluOai:
/// g = min(gate, limit), u = clamp(up, -limit, limit),
/// g / (1 + e^-(alpha g)) * (u + 1).
ODMOE_HD float SwiGluOai(float gate, float up, float alpha, float limit) {
  const float g = gate > limit ? limit : gate;
  const float u = up < -limit ? -limit : (up > limit ? limit : up);
  return g / (1.0f + ExpF(-(alpha * g))) * (u + 1.0f);
}

// ---- RoPE ---------------------------------------------------------------------

/// cos and sin of one RoPE angle as the CPU backend: in double, times the
/// attention factor (1 without scaling), rounded once to f32. (The device's
/// double cos / sin are libdevice's, a few double ulp from glibc's.)
ODMOE_HD void RopeCosSin(double theta, double attention_factor, float* c, float* s) {
#if defined(__CUDA_ARCH__)
  *c = static_cast<float>(::cos(theta) * attention_factor);
  *s = static_cast<float>(::sin(theta) * attention_factor);
#else
  *c = static_cast<float>(std::cos(theta) * attention_factor);
  *s = static_cast<float>(std::sin(theta) * attention_factor);
#endif
}

/// The rotation of one pair: (a, b) -> (a*c - b*s, a*s + b*c), unfused.
ODMOE_HD void RopeRotate(float c, float s, float* a, float* b) {
  const float x = *a;
  const float y = *b;
  *a = x * c - y * s;
  *b = x * s + y * c;
}

// ---- The canonical order: 16 lanes and a fixed tree -----------------------

inline constexpr int kLanes = 16;

/// s8[i] = l[i] + l[i+8], s4[i] = s8[i] + s8[i+4], s2[i] = s4[i] + s4[i+2],
/// result = s2[0] + s2[1].
ODMOE_HD float TreeReduce16(const float* l) {
  float s8[8];
  for (int i = 0; i < 8; ++i) s8[i] = l[i] + l[i + 8];
  float s4[4];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/// Lane `lane` of the canonical dot of a weight row (type T) with x:
/// fma over i = lane, lane + 16, ... < k, starting at +0.
template <DType T>
ODMOE_HD float LaneDot(const void* w_row, const float* x, int64_t k, int lane) {
  float acc = 0.0f;
  for (int64_t i = lane; i < k; i += kLanes) acc = Fma(LoadFloat<T>(w_row, i), x[i], acc);
  return acc;
}

/// Lane `lane` of the canonical plain sum of v[0, n).
ODMOE_HD float LaneSum(const float* v, int64_t n, int lane) {
  float acc = 0.0f;
  for (int64_t i = lane; i < n; i += kLanes) acc = acc + v[i];
  return acc;
}

// ---- Exact integer dots and byte tricks ----------------------------------

/// c + the sum of the four products of signed bytes of a and b (dp4a).
ODMOE_HD int32_t Dot4(int32_t a, int32_t b, int32_t c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>((static_cast<uint32_t>(a) >> (8 * i)) & 0xffu) *
         static_cast<int8_t>((static_cast<uint32_t>(b) >> (8 * i)) & 0xffu);
  }
  return c;
#endif
}

/// The little-endian 32-bit word at p at any alignment (byte loads: MXFP4's
/// 17-byte blocks start at odd addresses).
ODMOE_HD uint32_t LoadU32Bytes(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

/// Four unsigned bytes (each 0..127) minus `bias` (0..127) each, as four
/// signed bytes; no borrow crosses a byte.
ODMOE_HD int32_t BytesMinus(uint32_t bytes, uint32_t bias) {
  return static_cast<int32_t>(((bytes | 0x80808080u) - bias * 0x01010101u) ^ 0x80808080u);
}

/// Four nibbles (one per byte, values 0..15) to four signed codes v - 8.
ODMOE_HD int32_t NibblesToCodes(uint32_t nibbles) { return BytesMinus(nibbles, 8); }

/// A 16-entry table of signed bytes as two words (entries 0..7, 8..15), so
/// that lookups stay in registers on the device.
struct Lut16 {
  uint64_t lo, hi;
};

constexpr Lut16 MakeLut16(const int8_t (&v)[16]) {
  Lut16 t{0, 0};
  for (int i = 0; i < 8; ++i) {
    t.lo |= static_cast<uint64_t>(static_cast<uint8_t>(v[i])) << (8 * i);
    t.hi |= static_cast<uint64_t>(static_cast<uint8_t>(v[8 + i])) << (8 * i);
  }
  return t;
}

/// Four nibbles (one per byte) to the four table entries, as signed bytes.
ODMOE_HD int32_t LookupNibbles(uint64_t lut_lo, uint64_t lut_hi, uint32_t nibbles) {
  uint32_t out = 0;
  for (int b = 0; b < 4; ++b) {
    const uint32_t idx = (nibbles >> (8 * b)) & 15u;
    const uint64_t half = (idx & 8u) != 0 ? lut_hi : lut_lo;
    out |= static_cast<uint32_t>((half >> (8 * (idx & 7u))) & 0xffu) << (8 * b);
  }
  return static_cast<int32_t>(out);
}

/// The sum of the four signed bytes of v.
ODMOE_HD int32_t ByteSum(int32_t v) { return Dot4(v, 0x01010101, 0); }

// ---- Routing ---------------------------------------------------------------

/// RouterTopK of one row, as the CPU backend: k rounds of "largest logit not
/// yet taken" (strict '>' keeps the lower id on ties); e_j = ExpF(l_j - l_max)
/// over the sum of the selected e (selection order) when `normalize`, else of
/// every expert's e (expert order); then times `scale` when it is not 1.
ODMOE_HD void RouterTopKRow(const float* logits, int n_expert, int k, bool normalize, float scale,
                            int32_t* ids, float* weights) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int p = 0; p < j; ++p) taken = taken || ids[p] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[j] = best;
    weights[j] = logits[best];
  }
  const float m = weights[0];
  float sum = 0.0f;
  if (normalize) {
    for (int j = 0; j < k; ++j) sum += ExpF(weights[j] - m);
  } else {
    for (int e = 0; e < n_expert; ++e) sum += ExpF(logits[e] - m);
  }
  for (int j = 0; j < k; ++j) weights[j] = ExpF(weights[j] - m) / sum;
  if (scale != 1.0f) {
    for (int j = 0; j < k; ++j) weights[j] = weights[j] * scale;
  }
}

/// RouterTopK's sigmoid rule (DeepSeek-V3; backend.h) of one row, as the CPU
/// backend computes it, without scratch memory: s_e = Sigmoid(l_e) and the
/// biased b_e = s_e + bias[e] are recomputed where needed (the same bits),
/// the kept groups are a bit mask (n_group <= 64), the k chosen are inserted
/// into ids / weights by descending s (ties: lower id).
ODMOE_HD float BiasedScore(const float* logits, const float* bias, int e) {
  const float s = 1.0f / (1.0f + ExpF(-logits[e]));
  return bias != nullptr ? s + bias[e] : s;
}

ODMOE_HD void RouterTopKSigmoidRow(const float* logits, int n_expert, int k, bool normalize,
                                   float scale, int n_group, int n_group_used, const float* bias,
                                   int32_t* ids, float* weights) {
  const bool limited = n_group > 1 && n_group_used < n_group;
  const int per_group = limited ? n_expert / n_group : n_expert;
  const float neg_inf = -INFINITY;
  uint64_t kept = ~0ull;
  if (limited) {
    kept = 0;
    for (int r = 0; r < n_group_used; ++r) {
      int best = -1;
      float best_rank = neg_inf;
      for (int g = 0; g < n_group; ++g) {
        if ((kept >> g) & 1ull) continue;
        float top1 = neg_inf, top2 = neg_inf;
        for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
          const float b = BiasedScore(logits, bias, e);
          if (b > top1) {
            top2 = top1;
            top1 = b;
          } else if (b > top2) {
            top2 = b;
          }
        }
        const float rank = top1 + top2;
        if (best < 0 || rank > best_rank) {
          best = g;
          best_rank = rank;
        }
      }
      kept |= 1ull << best;
    }
  }
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float best_b = neg_inf;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int p = 0; p < j; ++p) taken = taken || ids[p] == e;
      if (taken) continue;
      const float b = ((kept >> (e / per_group)) & 1ull) ? BiasedScore(logits, bias, e) : neg_inf;
      if (best < 0 || b > best_b) {
        best = e;
        best_b = b;
      }
    }
    const float s = 1.0f / (1.0f + ExpF(-logits[best]));
    int p = j;
    while (p > 0 && (s > weights[p - 1] || (s == weights[p - 1] && best < ids[p - 1]))) {
      ids[p] = ids[p - 1];
      weights[p] = weights[p - 1];
      --p;
    }
    ids[p] = best;
    weights[p] = s;
  }
  if (normalize) {
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += weights[j];
    sum = sum + 1e-20f;
    for (int j = 0; j < k; ++j) weights[j] = weights[j] / sum;
  }
  if (scale != 1.0f) {
    for (int j = 0; j < k; ++j) weights[j] = weights[j] * scale;
  }
}

// ---- Attention ----------------------------------------------------------------

/// The softmax maximum of one attention row: the scores' maximum `m`, then
/// the sink's logit when there is one (CPU: std::max(m, z)).
ODMOE_HD float AttentionMax(float m, bool has_sink, float sink) {
  return has_sink ? MaxSkipNan(m, sink) : m;
}

/// The softmax denominator of one attention row: the canonical sum of the
/// p_j (`lane_sum`), then plus ExpF(z - m) when there is a sink.
ODMOE_HD float AttentionDenominator(float lane_sum, bool has_sink, float sink, float m) {
  return has_sink ? lane_sum + ExpF(sink - m) : lane_sum;
}

/// The first cache row a query at position p sees: p - window + 1 (not
/// below 0) with a window, else 0.
ODMOE_HD int64_t AttentionFirstRow(int64_t p, int window) {
  if (window <= 0) return 0;
  const int64_t first = p - window + 1;
  return first > 0 ? first : 0;
}

/// 1 / (1 + e^-x), as the CPU backend's Sigmoid.
ODMOE_HD float Sigmoid(float x) { return 1.0f / (1.0f + ExpF(-x)); }

}  // namespace odmoe::cuda_numerics
