// AVX2 unpacking of K-family super-blocks into KUnpacked (internal), shared
// by the AVX2, AVX-512 and AVX-512 VNNI K-family tables. Each includes it
// after its own target pragma, so the struct lives in an unnamed namespace:
// every translation unit compiles its own copy for its own target (see
// cpu_kernels_avx512_impl.h). The bytes written are CpuKQuantUnpackReference's
// (the scales through the same scalar helpers of cpu_kquant_unpack.h).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"
#include "cpu_kquant_unpack.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): one copy per target, see above

struct KUnpackX86 {
  static __m256i Load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void Store256(void* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
  /// F16C: exact, the value F16ToF32 gives.
  static float Half(uint16_t h) { return _cvtsh_ss(h); }

  /// Q4_K / Q5_K: the 8 six-bit scales and mins (UnpackQ4KScalesMins four
  /// at a time in 32-bit words), each repeated for both 16-element halves.
  __attribute__((always_inline)) static inline void Scales6(const uint8_t* packed, KUnpacked* out) {
    uint32_t u[3];
    std::memcpy(u, packed, sizeof(u));
    const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
    const uint32_t mn_lo = u[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const __m128i sc = _mm_cvtepu8_epi16(
        _mm_cvtsi64_si128(static_cast<int64_t>(sc_lo | static_cast<uint64_t>(sc_hi) << 32)));
    const __m128i mn = _mm_cvtepu8_epi16(
        _mm_cvtsi64_si128(static_cast<int64_t>(mn_lo | static_cast<uint64_t>(mn_hi) << 32)));
    Store256(out->sc, _mm256_set_m128i(_mm_unpackhi_epi16(sc, sc), _mm_unpacklo_epi16(sc, sc)));
    Store256(out->mn, _mm256_set_m128i(_mm_unpackhi_epi16(mn, mn), _mm_unpacklo_epi16(mn, mn)));
    Store256(out->corr, _mm256_setzero_si256());
  }

  /// Lane i of the result: the total of the 8 int32 lanes of v[i], i < 8.
  __attribute__((always_inline)) static inline __m256i Sum8(const __m256i* v) {
    const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                            _mm256_permute2x128_si256(u0, u1, 0x31));
  }
  /// out[s] = the total of the lanes of parts[s], s < 16 (exact integers).
  static void Sum16(const __m256i* parts, int32_t* out) {
    Store256(out, Sum8(parts));
    Store256(out + 8, Sum8(parts + 8));
  }

  /// The types whose unsigned codes carry an offset and that have no mins
  /// (Q3_K, Q6_K): sc, mn = 0, corr = -offset * sc (exact in int16), d from
  /// the f16 scale, dmin = 0.
  __attribute__((always_inline)) static inline void StoreOffsetScales(__m256i sc, int offset,
                                                                      uint16_t d, KUnpacked* out) {
    Store256(out->sc, sc);
    Store256(out->mn, _mm256_setzero_si256());
    Store256(out->corr, _mm256_mullo_epi16(sc, _mm256_set1_epi16(static_cast<int16_t>(-offset))));
    out->d = Half(d);
    out->dmin = 0.0f;
  }

  /// The per-sub-block fields and the f32 scales of KUnpacked (not q).
  template <DType T>
  __attribute__((always_inline)) static inline void UnpackScales(const uint8_t* block,
                                                                 KUnpacked* out) {
    if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      // Q4_K and Q5_K share the head: d, dmin, 12 scale bytes.
      const auto& b = *reinterpret_cast<const BlockQ4K*>(block);
      static_assert(offsetof(BlockQ4K, scales) == offsetof(BlockQ5K, scales));
      static_assert(offsetof(BlockQ4K, dmin) == offsetof(BlockQ5K, dmin));
      Scales6(b.scales, out);
      out->d = Half(b.d);
      out->dmin = Half(b.dmin);
    } else if constexpr (T == DType::kQ6_K) {
      const auto& b = *reinterpret_cast<const BlockQ6K*>(block);
      const __m256i sc =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
      StoreOffsetScales(sc, kQ6KCodeOffset, b.d, out);
    } else if constexpr (T == DType::kQ2_K) {
      const auto& b = *reinterpret_cast<const BlockQ2K*>(block);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m128i low = _mm_set1_epi8(0x0f);
      Store256(out->sc, _mm256_cvtepu8_epi16(_mm_and_si128(v, low)));
      Store256(out->mn, _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), low)));
      Store256(out->corr, _mm256_setzero_si256());
      out->d = Half(b.d);
      out->dmin = Half(b.dmin);
    } else if constexpr (T == DType::kQ3_K) {
      const auto& b = *reinterpret_cast<const BlockQ3K*>(block);
      // UnpackQ3KScales 16 at a time: low 4 bits from bytes 0..7 (low
      // nibbles for j < 8, high for j >= 8), high 2 bits from byte 8 + j % 4
      // shifted by 2 * (j / 4).
      const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.scales));
      const __m128i n4 = _mm_set1_epi8(0x0f);
      const __m128i low =
          _mm_unpacklo_epi64(_mm_and_si128(lo8, n4), _mm_and_si128(_mm_srli_epi16(lo8, 4), n4));
      uint32_t hw;
      std::memcpy(&hw, b.scales + 8, sizeof(hw));
      const __m128i high = _mm_and_si128(
          _mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(hw)), _mm_setr_epi32(0, 2, 4, 6)),
          _mm_set1_epi8(0x03));
      const __m128i biased = _mm_or_si128(low, _mm_slli_epi16(high, 4));
      const __m256i sc = _mm256_sub_epi16(_mm256_cvtepu8_epi16(biased), _mm256_set1_epi16(32));
      StoreOffsetScales(sc, kQ3KCodeOffset, b.d, out);
    } else {  // IQ4_XS
      const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
      // UnpackIq4XsScales 8 at a time: nibble j of scales_l, bits 2j..2j+1
      // of scales_h (moved to the top of each word by a multiply, then down).
      uint32_t l;
      std::memcpy(&l, b.scales_l, sizeof(l));
      const __m128i nib =
          _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(l & 0x0f0f0f0fu)),
                            _mm_cvtsi32_si128(static_cast<int>((l >> 4) & 0x0f0f0f0fu)));
      const __m128i high = _mm_srli_epi16(
          _mm_mullo_epi16(
              _mm_set1_epi16(static_cast<int16_t>(b.scales_h)),
              _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
          14);
      const __m128i sc = _mm_sub_epi16(
          _mm_or_si128(_mm_cvtepu8_epi16(nib), _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
      Store256(out->sc, _mm256_set_m128i(_mm_unpackhi_epi16(sc, sc), _mm_unpacklo_epi16(sc, sc)));
      Store256(out->mn, _mm256_setzero_si256());
      Store256(out->corr, _mm256_setzero_si256());
      out->d = Half(b.d);
      out->dmin = 0.0f;
    }
  }

  template <DType T>
  __attribute__((always_inline)) static inline void Unpack(const uint8_t* block, KUnpacked* out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    const __m256i m1 = _mm256_set1_epi8(0x01);
    uint8_t* q = out->q;
    UnpackScales<T>(block, out);
    if constexpr (T == DType::kQ4_K) {
      const auto& b = *reinterpret_cast<const BlockQ4K*>(block);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = Load256(b.qs + 32 * c);
        Store256(q + 64 * c, _mm256_and_si256(v, m4));
        Store256(q + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      }
    } else if constexpr (T == DType::kQ5_K) {
      const auto& b = *reinterpret_cast<const BlockQ5K*>(block);
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
