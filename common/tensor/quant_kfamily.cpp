// Dequantization of Q2_K .. Q6_K, Q8_K, IQ4_XS and the Q8_K activation
// quantizer (see tensor/quant.h); the weight quantizers are in
// quant_k_quantize.cpp. odmoe_tensor builds with -ffp-contract=off, so each
// product below is one rounded f32 multiply, as in the definitions.
#include <cassert>
#include <cmath>
#include <cstring>

#include "tensor/quant_blocks.h"
#include "tensor/quant_families.h"
#include "tensor/quant_k_codes.h"
#include "tensor/quant_k_quantize.h"
#include "tensor/quant_k_scales.h"
#include "util/fp16.h"

namespace odmoe::quant_internal {
namespace {

constexpr int kN = kSuperBlockElems;

void DequantizeQ2K(const BlockQ2K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    const BlockQ2K& b = blocks[s];
    const float d = F16ToF32(b.d);
    const float dmin = F16ToF32(b.dmin);
    uint8_t scale[16], min[16], q[kN];
    UnpackQ2KScalesMins(b.scales, scale, min);
    UnpackQ2KCodes(b, q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(scale[j]);
      const float ml = dmin * static_cast<float>(min[j]);
      for (int i = 16 * j; i < 16 * j + 16; ++i) dst[i] = dl * static_cast<float>(q[i]) - ml;
    }
  }
}

void DequantizeQ3K(const BlockQ3K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    const BlockQ3K& b = blocks[s];
    const float d = F16ToF32(b.d);
    int8_t scale[16], q[kN];
    UnpackQ3KScales(b.scales, scale);
    UnpackQ3KCodes(b, q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(scale[j]);
      for (int i = 16 * j; i < 16 * j + 16; ++i) dst[i] = dl * static_cast<float>(q[i]);
    }
  }
}

// Q4_K and Q5_K: (d * scale) * q - dmin * min over 8 sub-blocks of 32.
void DequantizeScaleMin32(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* packed_scales,
                          const uint8_t* q, float* dst) {
  const float d = F16ToF32(d_bits);
  const float dmin = F16ToF32(dmin_bits);
  uint8_t scale[8], min[8];
  UnpackQ4KScalesMins(packed_scales, scale, min);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(scale[j]);
    const float ml = dmin * static_cast<float>(min[j]);
    for (int i = 32 * j; i < 32 * j + 32; ++i) dst[i] = dl * static_cast<float>(q[i]) - ml;
  }
}

void DequantizeQ4K(const BlockQ4K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    uint8_t q[kN];
    UnpackQ4KCodes(blocks[s], q);
    DequantizeScaleMin32(blocks[s].d, blocks[s].dmin, blocks[s].scales, q, dst);
  }
}

void DequantizeQ5K(const BlockQ5K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    uint8_t q[kN];
    UnpackQ5KCodes(blocks[s], q);
    DequantizeScaleMin32(blocks[s].d, blocks[s].dmin, blocks[s].scales, q, dst);
  }
}

void DequantizeQ6K(const BlockQ6K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    const BlockQ6K& b = blocks[s];
    const float d = F16ToF32(b.d);
    int8_t q[kN];
    UnpackQ6KCodes(b, q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(b.scales[j]);
      for (int i = 16 * j; i < 16 * j + 16; ++i) dst[i] = dl * static_cast<float>(q[i]);
    }
  }
}

void DequantizeIq4Xs(const BlockIq4Xs* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    const BlockIq4Xs& b = blocks[s];
    const float d = F16ToF32(b.d);
    int8_t scale[8], q[kN];
    UnpackIq4XsScales(b.scales_h, b.scales_l, scale);
    UnpackIq4XsValues(b, q);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * static_cast<float>(scale[j]);
      for (int i = 32 * j; i < 32 * j + 32; ++i) dst[i] = dl * static_cast<float>(q[i]);
    }
  }
}

void DequantizeQ8K(const BlockQ8K* blocks, float* dst, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, dst += kN) {
    for (int i = 0; i < kN; ++i) dst[i] = blocks[s].d * static_cast<float>(blocks[s].qs[i]);
  }
}

// min(127, round-half-to-even(v)), with NaN and v >= 127.5 giving 127 and
// v <= -127.5 giving -127 (finite input never reaches either clamp). In range,
// adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
inline int8_t RoundQ8K(float v) {
  if (!(v < 127.5f)) return 127;
  if (!(v > -127.5f)) return -127;
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return static_cast<int8_t>((bits & 0x007fffff) - 0x00400000);
}

void QuantizeQ8K(const float* src, BlockQ8K* blocks, int64_t n_blocks) {
  for (int64_t s = 0; s < n_blocks; ++s, src += kN) {
    BlockQ8K& b = blocks[s];
    float amax = 0.0f;
    float max = 0.0f;  // the element of largest magnitude, sign kept (first one wins)
    for (int i = 0; i < kN; ++i) {
      const float a = std::fabs(src[i]);
      if (a > amax) {  // NaN compares false: skipped
        amax = a;
        max = src[i];
      }
    }
    if (amax == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < kN; ++i) b.qs[i] = RoundQ8K(iscale * src[i]);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sum += b.qs[i];
      b.bsums[j] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
  }
}

}  // namespace

void DequantizeKRow(DType type, const void* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / kN;
  switch (type) {
    case DType::kQ2_K:
      return DequantizeQ2K(static_cast<const BlockQ2K*>(src), dst, n_blocks);
    case DType::kQ3_K:
      return DequantizeQ3K(static_cast<const BlockQ3K*>(src), dst, n_blocks);
    case DType::kQ4_K:
      return DequantizeQ4K(static_cast<const BlockQ4K*>(src), dst, n_blocks);
    case DType::kQ5_K:
      return DequantizeQ5K(static_cast<const BlockQ5K*>(src), dst, n_blocks);
    case DType::kQ6_K:
      return DequantizeQ6K(static_cast<const BlockQ6K*>(src), dst, n_blocks);
    case DType::kQ8_K:
      return DequantizeQ8K(static_cast<const BlockQ8K*>(src), dst, n_blocks);
    case DType::kIQ4_XS:
      return DequantizeIq4Xs(static_cast<const BlockIq4Xs*>(src), dst, n_blocks);
    default:
      break;
  }
  assert(false && "DequantizeKRow: not a K-family type");
}

void QuantizeKRow(DType type, const float* src, void* dst, int64_t n) {
  const int64_t n_blocks = n / kN;
  switch (type) {
    case DType::kQ8_K:
      return QuantizeQ8K(src, static_cast<BlockQ8K*>(dst), n_blocks);
    case DType::kQ2_K:
      return QuantizeQ2K(src, static_cast<BlockQ2K*>(dst), n_blocks);
    case DType::kQ3_K:
      return QuantizeQ3K(src, static_cast<BlockQ3K*>(dst), n_blocks);
    case DType::kQ4_K:
      return QuantizeQ4K(src, static_cast<BlockQ4K*>(dst), n_blocks);
    case DType::kQ5_K:
      return QuantizeQ5K(src, static_cast<BlockQ5K*>(dst), n_blocks);
    case DType::kQ6_K:
      return QuantizeQ6K(src, static_cast<BlockQ6K*>(dst), n_blocks);
    case DType::kIQ4_XS:
      return QuantizeIq4Xs(src, static_cast<BlockIq4Xs*>(dst), n_blocks);
    default:
      break;
  }
  assert(false && "QuantizeKRow: not a K-family type");
}

}  // namespace odmoe::quant_internal
