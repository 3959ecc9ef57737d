#include "tensor/quant.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "tensor/quant_families.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

void DequantizeQ8_0(const BlockQ8_0* blocks, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = F16ToF32(blocks[b].d);
    for (int j = 0; j < kQ8_0BlockElems; ++j) dst[j] = d * static_cast<float>(blocks[b].qs[j]);
    dst += kQ8_0BlockElems;
  }
}

void DequantizeQ4_0(const BlockQ4_0* blocks, float* dst, int64_t n_blocks) {
  constexpr int kHalf = kQ4_0BlockElems / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = F16ToF32(blocks[b].d);
    for (int j = 0; j < kHalf; ++j) {
      dst[j] = d * static_cast<float>((blocks[b].qs[j] & 0x0f) - 8);
      dst[j + kHalf] = d * static_cast<float>((blocks[b].qs[j] >> 4) - 8);
    }
    dst += kQ4_0BlockElems;
  }
}

// fmax(-127, fmin(roundf(v), 127)), NaN giving 127 as it does there, without
// libm calls (the CPU backend quantizes every activation row of a quantized
// MatMul with this code, so it must be cheap): for |v| < 127.5 the fraction
// v - trunc(v) is exact, and rounding half away from zero is a comparison.
inline int8_t ClampedRound(float v) {
  if (!(v < 127.5f)) return 127;  // v >= 127.5 or NaN
  if (!(v > -127.5f)) return -127;
  const int t = static_cast<int>(v);  // toward zero
  const float frac = v - static_cast<float>(t);
  return static_cast<int8_t>(frac >= 0.5f ? t + 1 : (frac <= -0.5f ? t - 1 : t));
}

// For finite input the clamps never bind (|x * id| <= 127 by construction), so
// the codes equal the reference quantizer's; they only keep non-finite input
// from reaching an undefined float-to-int conversion.
void QuantizeQ8_0(const float* src, BlockQ8_0* blocks, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    float amax = 0.0f;  // fmax(amax, |x|): NaN is skipped
    for (int j = 0; j < kQ8_0BlockElems; ++j) {
      const float a = std::fabs(src[j]);
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = F32ToF16(d);
    for (int j = 0; j < kQ8_0BlockElems; ++j) blocks[b].qs[j] = ClampedRound(src[j] * id);
    src += kQ8_0BlockElems;
  }
}

void QuantizeQ4_0(const float* src, BlockQ4_0* blocks, int64_t n_blocks) {
  constexpr int kHalf = kQ4_0BlockElems / 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    float amax = 0.0f;
    float max = 0.0f;  // the element of largest magnitude, sign kept (first one wins)
    for (int j = 0; j < kQ4_0BlockElems; ++j) {
      if (amax < std::fabs(src[j])) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = F32ToF16(d);
    for (int j = 0; j < kHalf; ++j) {
      // Truncation toward zero of x * id + 8.5, capped at 15.
      const float v0 = std::fmax(0.0f, std::fmin(src[j] * id + 8.5f, 15.0f));
      const float v1 = std::fmax(0.0f, std::fmin(src[j + kHalf] * id + 8.5f, 15.0f));
      blocks[b].qs[j] = static_cast<uint8_t>(static_cast<int>(v0) | (static_cast<int>(v1) << 4));
    }
    src += kQ4_0BlockElems;
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  assert(RowSizeValid(type, n));
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(h[i]);
      return;
    }
    case DType::kQ8_0:
      DequantizeQ8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQ8_0BlockElems);
      return;
    case DType::kQ4_0:
      DequantizeQ4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQ4_0BlockElems);
      return;
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
      return quant_internal::DequantizeBlock32Row(type, src, dst, n);
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kIQ4_XS:
      return quant_internal::DequantizeKRow(type, src, dst, n);
  }
  assert(false && "DequantizeRow: unsupported DType");
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  assert(RowSizeValid(type, n));
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = F32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = F32ToBF16(src[i]);
      return;
    }
    case DType::kQ8_0:
      QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), n / kQ8_0BlockElems);
      return;
    case DType::kQ4_0:
      QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), n / kQ4_0BlockElems);
      return;
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
      return quant_internal::QuantizeBlock32Row(type, src, dst, n);
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kIQ4_XS:
      return quant_internal::QuantizeKRow(type, src, dst, n);
  }
  assert(false && "QuantizeRow: unsupported DType");
}

}  // namespace odmoe
