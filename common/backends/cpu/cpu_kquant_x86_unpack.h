// AVX2 unpacking of K-family super-blocks into KUnpacked (internal), shared
// by the AVX2, AVX-512 and AVX-512 VNNI K-family tables. Each includes it
// after its own target pragma, so the struct lives in an unnamed namespace:
// every translation unit compiles its own copy for its own target (see
// cpu_kernels_avx512_impl.h). The bytes written are CpuKQuantUnpackReference's
// (the scales through the same scalar helpers of cpu_kquant_unpack.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu_kquant.h"
#include "cpu_kquant_unpack.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): one copy per target, see above

struct KUnpackX86 {
  static __m256i Load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void Store256(void* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }

  template <DType T>
  __attribute__((always_inline)) static inline void Unpack(const uint8_t* block, KUnpacked* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    const __m256i m1 = _mm256_set1_epi8(0x01);
    uint8_t* q = out->q;
    if constexpr (T == DType::kQ4_K) {
      const auto& b = *reinterpret_cast<const BlockQ4K*>(block);
      KUnpackScalesQ4K(b, out);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = Load256(b.qs + 32 * c);
        Store256(q + 64 * c, _mm256_and_si256(v, m4));
        Store256(q + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      }
    } else if constexpr (T == DType::kQ5_K) {
      const auto& b = *reinterpret_cast<const BlockQ5K*>(block);
      KUnpackScalesQ5K(b, out);
      const __m256i hb = Load256(b.qh);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = Load256(b.qs + 32 * c);
        const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), m1);
        const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), m1);
        Store256(q + 64 * c, _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_slli_epi16(h0, 4)));
        Store256(q + 64 * c + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                                                  _mm256_slli_epi16(h1, 4)));
      }
    } else if constexpr (T == DType::kQ6_K) {
      const auto& b = *reinterpret_cast<const BlockQ6K*>(block);
      KUnpackScalesQ6K(b, out);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = Load256(b.ql + 64 * h);
        const __m256i ql1 = Load256(b.ql + 64 * h + 32);
        const __m256i qh = Load256(b.qh + 32 * h);
        auto high = [&](int shift) {
          return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, shift), m2), 4);
        };
        uint8_t* o = q + 128 * h;
        Store256(o, _mm256_or_si256(_mm256_and_si256(ql0, m4), high(0)));
        Store256(o + 32, _mm256_or_si256(_mm256_and_si256(ql1, m4), high(2)));
        Store256(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), high(4)));
        Store256(o + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), high(6)));
      }
    } else if constexpr (T == DType::kQ2_K) {
      const auto& b = *reinterpret_cast<const BlockQ2K*>(block);
      KUnpackScalesQ2K(b, out);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = Load256(b.qs + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          Store256(q + 128 * h + 32 * k, _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m2));
        }
      }
    } else if constexpr (T == DType::kQ3_K) {
      const auto& b = *reinterpret_cast<const BlockQ3K*>(block);
      KUnpackScalesQ3K(b, out);
      const __m256i hm = Load256(b.hmask);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = Load256(b.qs + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m256i low = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m2);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), m1);
          Store256(q + 128 * h + 32 * k, _mm256_or_si256(low, _mm256_slli_epi16(hi, 2)));
        }
      }
    } else {  // IQ4_XS: sub-block j = 16 bytes, low nibbles then high nibbles
      const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
      KUnpackScalesIq4Xs(b, out);
      const __m256i lut = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {  // sub-blocks 2p and 2p + 1
        const __m256i v = Load256(b.qs + 32 * p);
        const __m256i lo = _mm256_and_si256(v, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        Store256(q + 64 * p, _mm256_shuffle_epi8(lut, _mm256_permute2x128_si256(lo, hi, 0x20)));
        Store256(q + 64 * p + 32,
                 _mm256_shuffle_epi8(lut, _mm256_permute2x128_si256(lo, hi, 0x31)));
      }
    }
  }
};

}  // namespace
}  // namespace odmoe
