// The Q8_K activation quantizer with AVX-512 (internal): included by the
// AVX-512 tables after their target pragma. The scalar definition is
// QuantizeRow(DType::kQ8_K) (tensor/quant_kfamily.cpp); this gives its bits,
// straight into the KActs layout (no BlockQ8K in between):
//   - the first element of largest magnitude, sign kept, sets
//     iscale = -127 / max (NaN never wins; a block of zeros is all zero);
//   - code = iscale * x rounded to nearest, ties to even, by adding 1.5 * 2^23
//     (the scalar trick, one rounded f32 add), clamped to +-127, NaN to 127;
//   - bsums of 16 codes, d = 1 / iscale.
//
//   QuantizeQ8KActsAvx512(x_row, superblocks, blocks, d);
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): compiled for one target only

inline void QuantizeQ8KActsAvx512(const float* x, int64_t superblocks, KActBlock* blocks,
                                  float* d) {
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 top = _mm512_set1_ps(127.5f), bottom = _mm512_set1_ps(-127.5f);
  const __m512i mantissa = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000);
  for (int64_t s = 0; s < superblocks; ++s) {
    const float* src = x + s * kSuperBlockElems;
    KActBlock& b = blocks[s];
    // Per lane the first largest magnitude (strictly greater: NaN skipped).
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) {
      const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(src + 16 * i));
      amax = _mm512_mask_mov_ps(amax, _mm512_cmp_ps_mask(a, amax, _CMP_GT_OQ), a);
    }
    const float m = _mm512_reduce_max_ps(amax);
    if (m == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      d[s] = 0.0f;
      continue;
    }
    // The first element of that magnitude, in element order.
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(src + 16 * i)),
                                               _mm512_set1_ps(m), _CMP_EQ_OQ);
      if (hit != 0) {
        max = src[16 * i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 scale = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512 v = _mm512_mul_ps(scale, _mm512_loadu_ps(src + 16 * i));
      const __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, magic));
      __m512i q = _mm512_sub_epi32(_mm512_and_si512(bits, mantissa), bias);
      const __mmask16 high = static_cast<__mmask16>(~_mm512_cmp_ps_mask(v, top, _CMP_LT_OQ));
      const __mmask16 low =
          static_cast<__mmask16>(~_mm512_cmp_ps_mask(v, bottom, _CMP_GT_OQ) & ~high);
      q = _mm512_mask_mov_epi32(q, high, _mm512_set1_epi32(127));
      q = _mm512_mask_mov_epi32(q, low, _mm512_set1_epi32(-127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * i), _mm512_cvtepi32_epi8(q));
      b.bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    d[s] = 1.0f / iscale;
  }
}

}  // namespace
}  // namespace odmoe
