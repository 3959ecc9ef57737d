// Dequantization and quantization of Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (the
// rules are in tensor/quant.h). Every float operation is written out in the
// reference order, one rounding each (odmoe_tensor builds with
// -ffp-contract=off), so the results are the gguf package's bit for bit.
#include <cassert>
#include <cmath>
#include <cstring>

#include "tensor/quant_blocks.h"
#include "tensor/quant_families.h"
#include "util/fp16.h"

namespace odmoe::quant_internal {
namespace {

constexpr int kHalf = kBlock32Elems / 2;

/// The 4-bit code of element e (0..31): low nibbles first, then high ones.
inline int Nibble(const uint8_t* qs, int e) {
  return e < kHalf ? qs[e] & 0x0f : qs[e - kHalf] >> 4;
}

/// The 5-bit code of element e of a Q5_0 / Q5_1 block.
inline int Code5(const uint8_t* qh, const uint8_t* qs, int e) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof(h));
  return Nibble(qs, e) | static_cast<int>(((h >> e) & 1u) << 4);
}

/// trunc(v) for v in [0, max_code], clamped first so that no input (huge,
/// NaN: fmin(NaN, m) = m) reaches an undefined float-to-int conversion. For
/// the values the reference quantizers produce the clamps are no-ops.
inline int TruncCode(float v, int max_code) {
  return static_cast<int>(std::fmax(0.0f, std::fmin(v, static_cast<float>(max_code))));
}

/// Packs 32 codes (< 16 each after masking) into 16 bytes of nibbles.
inline void PackNibbles(const int* codes, uint8_t* qs) {
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0f) | ((codes[j + kHalf] & 0x0f) << 4));
  }
}

/// The fifth bits of 32 codes as the LE 32-bit qh field.
inline void PackHighBits(const int* codes, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kBlock32Elems; ++j) h |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
  std::memcpy(qh, &h, sizeof(h));
}

/// min and max of a block (NaN elements are skipped unless the first is NaN).
inline void MinMax(const float* x, float* min, float* max) {
  *min = x[0];
  *max = x[0];
  for (int j = 1; j < kBlock32Elems; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

/// The element of largest magnitude, sign kept (the first one among equals).
inline float SignedAbsMax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock32Elems; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// ---- Dequantization ----

void DequantizeQ4_1(const BlockQ4_1* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32Elems) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    for (int e = 0; e < kBlock32Elems; ++e) {
      const float dq = d * static_cast<float>(Nibble(b[i].qs, e));  // two roundings, no fma
      dst[e] = dq + m;
    }
  }
}

void DequantizeQ5_0(const BlockQ5_0* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32Elems) {
    const float d = F16ToF32(b[i].d);
    for (int e = 0; e < kBlock32Elems; ++e) {
      dst[e] = d * static_cast<float>(Code5(b[i].qh, b[i].qs, e) - 16);
    }
  }
}

void DequantizeQ5_1(const BlockQ5_1* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32Elems) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    for (int e = 0; e < kBlock32Elems; ++e) {
      const float dq = d * static_cast<float>(Code5(b[i].qh, b[i].qs, e));
      dst[e] = dq + m;
    }
  }
}

void DequantizeIq4Nl(const BlockIq4Nl* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32Elems) {
    const float d = F16ToF32(b[i].d);
    for (int e = 0; e < kBlock32Elems; ++e) {
      dst[e] = d * static_cast<float>(kIq4nlValues[Nibble(b[i].qs, e)]);
    }
  }
}

void DequantizeMxfp4(const BlockMxfp4* b, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += kBlock32Elems) {
    const float d = E8M0Half(b[i].e);
    for (int e = 0; e < kBlock32Elems; ++e) {
      dst[e] = d * static_cast<float>(kMxfp4Values[Nibble(b[i].qs, e)]);
    }
  }
}

// ---- Quantization ----

/// Q4_1 / Q5_1: d = (max - min) / levels, q = trunc((x - min) / d + 0.5).
template <class Block, int kLevels>
void QuantizeWithMin(const float* x, Block* out, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock32Elems) {
    float min, max;
    MinMax(x, &min, &max);
    const float d = (max - min) / static_cast<float>(kLevels);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int codes[kBlock32Elems];
    for (int e = 0; e < kBlock32Elems; ++e) {
      const float scaled = (x[e] - min) * id;
      codes[e] = TruncCode(scaled + 0.5f, kLevels);
    }
    out[i].d = F32ToF16(d);
    out[i].m = F32ToF16(min);
    if constexpr (kLevels == 31) PackHighBits(codes, out[i].qh);
    PackNibbles(codes, out[i].qs);
  }
}

/// Q5_0: d = max / -16 (max: the signed largest magnitude),
/// q = min(31, trunc(x / d + 16.5)).
void QuantizeQ5_0(const float* x, BlockQ5_0* out, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock32Elems) {
    const float d = SignedAbsMax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int codes[kBlock32Elems];
    for (int e = 0; e < kBlock32Elems; ++e) codes[e] = TruncCode(x[e] * id + 16.5f, 31);
    out[i].d = F32ToF16(d);
    PackHighBits(codes, out[i].qh);
    PackNibbles(codes, out[i].qs);
  }
}

/// MXFP4's shared exponent: floor(log2(amax)) - 2 + 127, so that amax / 2^(e-127)
/// lies in [4, 8) (E2M1's largest value is 6). 0 for a zero (or NaN) block;
/// clamped to 0..255 where the reference's conversion would wrap.
uint8_t Mxfp4Exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  if (std::isinf(amax)) return 255;
  const float e = std::floor(std::log2(amax)) - 2.0f + 127.0f;
  return static_cast<uint8_t>(std::fmax(0.0f, std::fmin(e, 255.0f)));
}

/// MXFP4: e from the block's amax, each code the grid value nearest to x
/// (|d * v - x| in f32, the first code among equal errors).
void QuantizeMxfp4(const float* x, BlockMxfp4* out, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kBlock32Elems) {
    float amax = 0.0f;
    bool nan = false;
    for (int e = 0; e < kBlock32Elems; ++e) {
      const float a = std::fabs(x[e]);
      nan |= std::isnan(a);
      if (a > amax) amax = a;
    }
    const uint8_t exp = nan ? 0 : Mxfp4Exponent(amax);
    const float d = E8M0Half(exp);
    int codes[kBlock32Elems];
    for (int e = 0; e < kBlock32Elems; ++e) {
      int best = 0;
      float best_err = std::fabs(d * static_cast<float>(kMxfp4Values[0]) - x[e]);
      for (int c = 1; c < 16; ++c) {
        const float err = std::fabs(d * static_cast<float>(kMxfp4Values[c]) - x[e]);
        if (err < best_err) {
          best = c;
          best_err = err;
        }
      }
      codes[e] = best;
    }
    out[i].e = exp;
    PackNibbles(codes, out[i].qs);
  }
}

}  // namespace

void DequantizeBlock32Row(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / kBlock32Elems;
  switch (type) {
    case DType::kQ4_1:
      return DequantizeQ4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::kQ5_0:
      return DequantizeQ5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::kQ5_1:
      return DequantizeQ5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::kIQ4_NL:
      return DequantizeIq4Nl(static_cast<const BlockIq4Nl*>(src), dst, nb);
    case DType::kMXFP4:
      return DequantizeMxfp4(static_cast<const BlockMxfp4*>(src), dst, nb);
    default:
      assert(false && "DequantizeBlock32Row: not a block32 type of this file");
  }
}

void QuantizeBlock32Row(DType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kBlock32Elems;
  switch (type) {
    case DType::kQ4_1:
      return QuantizeWithMin<BlockQ4_1, 15>(src, static_cast<BlockQ4_1*>(dst), nb);
    case DType::kQ5_0:
      return QuantizeQ5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case DType::kQ5_1:
      return QuantizeWithMin<BlockQ5_1, 31>(src, static_cast<BlockQ5_1*>(dst), nb);
    case DType::kIQ4_NL:
      return QuantizeIq4NlRow(src, static_cast<BlockIq4Nl*>(dst), nb);
    case DType::kMXFP4:
      return QuantizeMxfp4(src, static_cast<BlockMxfp4*>(dst), nb);
    default:
      assert(false && "QuantizeBlock32Row: not a block32 type of this file");
  }
}

}  // namespace odmoe::quant_internal
