// The Q8_0 activation quantizer with AVX-512 (internal): included by the
// AVX-512 kernel tables after their target pragma. The definition is
// QuantizeRow(DType::kQ8_0) (tensor/quant.cpp) laid out as QActGroups
// (cpu_qdot.h); this gives those bits, straight into the groups:
//   - amax = the largest |x| of the block (NaN never larger), d = amax / 127,
//     id = 1 / d (0 for d = 0), the scale F16ToF32(F32ToF16(d));
//   - code = x * id rounded half away from zero (the truncation, then the
//     exact fraction against +-0.5), 127 from 127.5 on and for NaN, -127 down
//     from -127.5;
//   - the block's 32 codes as 8 dwords (dword k: elements 4k .. 4k + 3) at
//     qs[64 k + 4 j] for block j of its group, and their sum.
//
//   QuantizeQ8_0ActsAvx512(x_row, blocks, groups);
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_qdot.h"
#include "util/fp16.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): compiled for one target only

/// ClampedRound of tensor/quant.cpp on 16 lanes.
inline __m512i RoundQ8_0Codes(__m512 v) {
  const __m512i t = _mm512_cvttps_epi32(v);
  const __m512 frac = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __mmask16 down = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i q = _mm512_mask_add_epi32(t, up, t, one);
  q = _mm512_mask_sub_epi32(q, down, q, one);
  const __mmask16 high =
      static_cast<__mmask16>(~_mm512_cmp_ps_mask(v, _mm512_set1_ps(127.5f), _CMP_LT_OQ));
  const __mmask16 low = static_cast<__mmask16>(
      ~_mm512_cmp_ps_mask(v, _mm512_set1_ps(-127.5f), _CMP_GT_OQ) & ~high);
  q = _mm512_mask_mov_epi32(q, high, _mm512_set1_epi32(127));
  return _mm512_mask_mov_epi32(q, low, _mm512_set1_epi32(-127));
}

inline void QuantizeQ8_0ActsAvx512(const float* x, int64_t blocks, QActGroup* out) {
  const int64_t groups = QGroups(blocks);
  if (blocks % kQGroupBlocks != 0) {  // the padding blocks of the last group: all zero
    std::memset(static_cast<void*>(out + groups - 1), 0, sizeof(QActGroup));
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const float* src = x + 32 * b;
    QActGroup& g = out[b / kQGroupBlocks];
    const int j = static_cast<int>(b % kQGroupBlocks);
    const __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
    // max(a, m) is a > m ? a : m per lane: a NaN magnitude never wins.
    __m512 m = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_setzero_ps());
    m = _mm512_max_ps(_mm512_abs_ps(v1), m);
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 scale = _mm512_set1_ps(id);
    const __m512i q0 = RoundQ8_0Codes(_mm512_mul_ps(v0, scale));
    const __m512i q1 = RoundQ8_0Codes(_mm512_mul_ps(v1, scale));
    alignas(16) int32_t words[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(words), _mm512_cvtepi32_epi8(q0));
    _mm_store_si128(reinterpret_cast<__m128i*>(words + 4), _mm512_cvtepi32_epi8(q1));
    for (int k = 0; k < 8; ++k) std::memcpy(g.qs + 64 * k + 4 * j, &words[k], sizeof(int32_t));
    g.d[j] = F16ToF32(F32ToF16(d));
    g.sum[j] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

}  // namespace
}  // namespace odmoe
