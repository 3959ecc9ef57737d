// The arithmetic of the CUDA kernels, written once for the device and the
// host: every function here is `__host__ __device__` under nvcc and a plain
// inline function under a host compiler, so the host tests
// (tests/cuda/cuda_numerics_test.cpp) check, bit for bit and without a GPU,
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
//   * Q8_0 / Q4_0 MatMul: QuantizeBlockQ8_0 per activation block, then
//     LaneQDot (exact integer block sums, fma per block) + TreeReduce16;
//   * softmax and attention denominators: LaneSum + TreeReduce16;
//   * SwiGLU, router weights: Silu, ExpF, RouterTopKRow.
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

// ---- Q8_0 activations and exact integer block dots ------------------------

/// Activation codes of one 32-element block as 8 words of 4 int8 codes
/// (element e in byte e % 4 of word e / 4), 4-byte aligned for dp4a.
struct QActBlock {
  int32_t qs[8];
};

/// fmax(-127, fmin(roundf(v), 127)) with NaN giving 127, as tensor/quant.cpp.
ODMOE_HD int ClampedRound(float v) {
  if (!(v < 127.5f)) return 127;
  if (!(v > -127.5f)) return -127;
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  return frac >= 0.5f ? t + 1 : (frac <= -0.5f ? t - 1 : t);
}

/// One block of QuantizeRow(kQ8_0, ...): 32 floats to codes and the f16 scale
/// bits; returns the scale as the dot uses it (F16ToF32 of those bits).
ODMOE_HD float QuantizeBlockQ8_0(const float* x, QActBlock* out, uint16_t* scale_bits) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = MaxSkipNan(amax, Abs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int w = 0; w < 8; ++w) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
      const int q = ClampedRound(x[4 * w + b] * id);
      word |= (static_cast<uint32_t>(q) & 0xffu) << (8 * b);
    }
    out->qs[w] = static_cast<int32_t>(word);
  }
  const uint16_t bits = F32ToF16(d);
  if (scale_bits != nullptr) *scale_bits = bits;
  return F16ToF32(bits);
}

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

/// Four nibbles (one per byte, values 0..15) to four signed codes v - 8.
ODMOE_HD int32_t NibblesToCodes(uint32_t nibbles) {
  return static_cast<int32_t>(((nibbles | 0x80808080u) - 0x08080808u) ^ 0x80808080u);
}

/// Bytes of one stored weight block.
template <DType T>
ODMOE_HD constexpr int QBlockBytes() {
  return T == DType::kQ8_0 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
}

/// The 32 signed codes of a stored Q8_0 / Q4_0 block, laid out as QActBlock.
/// `block` must be 2-byte aligned (blocks start at even offsets of a row).
template <DType T>
ODMOE_HD void DecodeWeightCodes(const uint8_t* block, int32_t* codes) {
  const uint8_t* qs = block + 2;  // past the scale
  if constexpr (T == DType::kQ8_0) {
    for (int w = 0; w < 8; ++w) codes[w] = static_cast<int32_t>(LoadU32Even(qs + 4 * w));
  } else {
    static_assert(T == DType::kQ4_0, "DecodeWeightCodes: Q8_0 or Q4_0");
    for (int w = 0; w < 4; ++w) {  // bytes 4w..4w+3: elements 4w.. (low), 16+4w.. (high)
      const uint32_t bytes = LoadU32Even(qs + 4 * w);
      codes[w] = NibblesToCodes(bytes & 0x0f0f0f0fu);
      codes[4 + w] = NibblesToCodes((bytes >> 4) & 0x0f0f0f0fu);
    }
  }
}

/// The scale of a stored block.
ODMOE_HD float WeightBlockScale(const uint8_t* block) { return F16ToF32(LoadU16(block)); }

/// The exact integer sum of one block: sum_i qw_i * qx_i.
ODMOE_HD int32_t BlockIsum(const int32_t* wcodes, const QActBlock& x) {
  int32_t s = 0;
  for (int w = 0; w < 8; ++w) s = Dot4(wcodes[w], x.qs[w], s);
  return s;
}

/// The canonical float step of one block: lane = fma(dw * dx, (float)isum, lane).
ODMOE_HD float QAccumulate(float dw, float dx, int32_t isum, float lane) {
  return Fma(dw * dx, static_cast<float>(isum), lane);
}

/// Lane `lane` of the canonical quantized dot of one stored weight row with
/// one quantized activation row (blocks lane, lane + 16, ... < n_blocks).
template <DType T>
ODMOE_HD float LaneQDot(const uint8_t* w_row, const QActBlock* x, const float* x_scales,
                        int64_t n_blocks, int lane) {
  float acc = 0.0f;
  for (int64_t b = lane; b < n_blocks; b += kLanes) {
    const uint8_t* block = w_row + b * QBlockBytes<T>();
    int32_t codes[8];
    DecodeWeightCodes<T>(block, codes);
    acc = QAccumulate(WeightBlockScale(block), x_scales[b], BlockIsum(codes, x[b]), acc);
  }
  return acc;
}

/// Element i of a stored row of any type, dequantized exactly as
/// tensor/quant.h's DequantizeRow (d * code in f32).
template <DType T>
ODMOE_HD float DequantElement(const uint8_t* row, int64_t i) {
  if constexpr (T == DType::kQ8_0 || T == DType::kQ4_0) {
    const uint8_t* block = row + (i / 32) * QBlockBytes<T>();
    const int e = static_cast<int>(i % 32);
    int code;
    if constexpr (T == DType::kQ8_0) {
      code = static_cast<int8_t>(block[2 + e]);
    } else {
      const uint8_t byte = block[2 + e % 16];
      code = (e < 16 ? (byte & 0x0f) : (byte >> 4)) - 8;
    }
    return WeightBlockScale(block) * static_cast<float>(code);
  } else {
    return LoadFloat<T>(row, i);
  }
}

// ---- Routing ---------------------------------------------------------------

/// RouterTopK of one row, as the CPU backend: k rounds of "largest logit not
/// yet taken" (strict '>' keeps the lower id on ties), then the softmax of
/// the selected logits summed in selection order.
ODMOE_HD void RouterTopKRow(const float* logits, int n_expert, int k, int32_t* ids,
                            float* weights) {
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
  for (int j = 0; j < k; ++j) {
    weights[j] = ExpF(weights[j] - m);
    sum += weights[j];
  }
  for (int j = 0; j < k; ++j) weights[j] = weights[j] / sum;
}

}  // namespace odmoe::cuda_numerics
