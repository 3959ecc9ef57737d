// Scalar math shared by the CPU ops (internal): one exp and one summation
// order, so results never depend on the ISA level or on libm's variants.
//
// ExpF uses only IEEE + - * and exact operations (the backend is compiled
// with -ffp-contract=off), so it gives the same bits on every x86-64 or
// other IEEE machine. Its error is below 2 ulp over the whole float range.
// The AVX2 / AVX-512 kernels carry a vector copy (Exp8 / Exp in their vector
// types) that performs the same operations in the same order.
//
//   float p = ExpF(s - max);
//   float total = CanonicalSum(p_array, n);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace odmoe::cpu_math {

/// ExpF's constants, shared with the vector versions of the SIMD kernels.
inline constexpr float kExpMax = 88.7228394f;   // above: +inf
inline constexpr float kExpMin = -103.972084f;  // below: 0
inline constexpr float kExpLn2Hi = 0.693145751953125f;
inline constexpr float kExpLn2Lo = 1.42860677e-06f;
/// Taylor coefficients of degree 7 down to 0 (Horner order).
inline constexpr float kExpPoly[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                      1.0f / 6.0f,    0.5f,          1.0f,          1.0f};

/// e^x for every float x (NaN stays NaN, overflow gives +inf, underflow 0).
inline float ExpF(float x) {
  if (std::isnan(x)) return x;
  if (x > kExpMax) return std::numeric_limits<float>::infinity();
  if (x < kExpMin) return 0.0f;
  // x = n * ln2 + r with |r| <= ln2 / 2; ln2 split so that n * kExpLn2Hi is
  // exact. n = round(x / ln2), half away from zero (a truncating conversion:
  // no libm call, the same on every ISA).
  const float t = x * 1.44269504f;
  const float n = static_cast<float>(static_cast<int>(t + (t < 0.0f ? -0.5f : 0.5f)));
  const float r = (x - n * kExpLn2Hi) - n * kExpLn2Lo;
  // Taylor polynomial of degree 7 (truncation error < 1e-8 relative).
  float p = kExpPoly[0];
  for (int i = 1; i < 8; ++i) p = p * r + kExpPoly[i];
  // p * 2^n in two steps so that each factor is a normal float.
  const int ni = static_cast<int>(n);  // exact: |n| <= 150
  const int n1 = ni / 2;
  auto pow2 = [](int e) {
    const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  };
  return p * pow2(n1) * pow2(ni - n1);
}

/// silu(x) = x / (1 + e^-x).
inline float Silu(float x) { return x / (1.0f + ExpF(-x)); }

/// tanh(y) = 1 - 2 / (ExpF(2y) + 1) (saturates to +-1; NaN stays NaN).
inline float TanhF(float y) { return 1.0f - 2.0f / (ExpF(2.0f * y) + 1.0f); }

/// GeGLU of one element: 0.5 g (1 + tanh(0.7978845608 (g + 0.044715 g^3))) * up.
inline float GeGlu(float gate, float up) {
  const float inner = 0.7978845608028654f * (gate + 0.044715f * (gate * gate * gate));
  return (0.5f * gate * (1.0f + TanhF(inner))) * up;
}

/// gpt-oss's clamped SwiGLU of one element: g = min(gate, limit),
/// u = clamp(up, -limit, limit), g / (1 + e^-(alpha g)) * (u + 1); a NaN
/// input stays NaN.
inline float SwiGluOai(float gate, float up, float alpha, float limit) {
  const float g = gate > limit ? limit : gate;
  const float u = up < -limit ? -limit : (up > limit ? limit : up);
  return g / (1.0f + ExpF(-(alpha * g))) * (u + 1.0f);
}

/// Sum of n floats in the canonical order: element i is added to lane i % 16
/// (index order, the tail zero-padded to 16), then the lanes are reduced by
/// the fixed tree ((l[i] + l[i+8]) -> +4 -> +2 -> +1) of cpu_backend.h.
inline float CanonicalSum(const float* v, int64_t n) {
  float lanes[16] = {};
  const int64_t n16 = n / 16 * 16;
  for (int64_t i = 0; i < n16; i += 16) {
    for (int l = 0; l < 16; ++l) lanes[l] += v[i + l];
  }
  if (n16 < n) {
    for (int l = 0; l < 16; ++l) lanes[l] += n16 + l < n ? v[n16 + l] : 0.0f;
  }
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = lanes[i] + lanes[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

}  // namespace odmoe::cpu_math
