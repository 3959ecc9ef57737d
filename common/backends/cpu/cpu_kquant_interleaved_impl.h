// Decode of KInterleave16 groups with AVX-512 VNNI (internal; cpu_kquant.h
// defines the layout). Included by cpu_kquant_avx512vnni.cpp after its target
// pragma, so it lives in an unnamed namespace (one copy per target).
//
// The 32-bit lanes are the 16 rows of the group: one 512-bit load is word w
// of all 16 rows' super-block, so every bit field of the stored block is
// taken out of all rows at once by the same shifts and masks, and
// vpdpbusd(codes, 4 broadcast activation codes) adds the 4-element dot of each
// row to its lane. A sub-block's sum is scaled by vpmulld with the rows'
// scales (per lane), the mins' sums by vpdpwssd with broadcast pairs of
// activation sums: exact int32 A_s and B_s of each row, as the definition's.
// The float step of super-block s updates lane s % 16 of every row; held
// transposed (acc[s % 16], its lanes the rows), it is one fma per
// super-block, and the lane tree is vertical adds between accumulators in the
// tree's order: the bits of dot_rows.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"
#include "cpu_kquant_impl.h"
#include "cpu_kquant_tile_layout_impl.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): one copy per target, see above

struct KInterleavedVnni {
  using V = __m512i;

  /// The IQ4_NL levels + 128 as unsigned bytes.
  alignas(16) static constexpr std::array<uint8_t, 16> kIq4Biased = [] {
    std::array<uint8_t, 16> t{};
    for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
    return t;
  }();

  /// Word w of the 16 rows' super-block at `sb`.
  static V Word(const uint8_t* sb, int w) { return _mm512_loadu_si512(sb + 64 * w); }
  static V Set(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  /// Activation codes e .. e + 3 in every lane.
  static V X4(const KActBlock* x, int e) {
    int32_t v;
    std::memcpy(&v, x->qs + e, sizeof(v));
    return _mm512_set1_epi32(v);
  }
  /// (lo, hi) as the two int16 halves of every lane.
  static V Pair(int lo, int hi) {
    return Set(static_cast<uint16_t>(lo) | static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
  }
  /// Unsigned byte k of every lane.
  static V Byte(V w, int k) {
    if (k == 3) return _mm512_srli_epi32(w, 24);
    return _mm512_and_si512(k == 0 ? w : _mm512_srli_epi32(w, 8 * k), Set(0xff));
  }
  /// Byte k of every lane in its low byte, the others 0 (one vpshufb).
  static V ByteToLane(V w, int k) {
    const uint32_t pick = 0x80808000u | static_cast<uint32_t>(k);
    const __m128i ctrl = _mm_setr_epi32(static_cast<int>(pick), static_cast<int>(pick + 4),
                                        static_cast<int>(pick + 8), static_cast<int>(pick + 12));
    return _mm512_shuffle_epi8(w, _mm512_broadcast_i32x4(ctrl));
  }
  /// Signed byte k of every lane.
  static V SignedByte(V w, int k) {
    return _mm512_srai_epi32(k == 3 ? w : _mm512_slli_epi32(w, 24 - 8 * k), 24);
  }
  /// (a & 0x0f) | b per byte (b holds bits 4-5 only).
  static V Merge(V a, V b) { return _mm512_ternarylogic_epi32(a, b, Set(0x0f0f0f0fu), 0xEC); }
  /// The f16 in the low (high) half of every lane, as f32.
  static __m512 HalfLo(V w) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w)); }
  static __m512 HalfHi(V w) { return HalfLo(_mm512_srli_epi32(w, 16)); }

  /// A 32-bit shift left by n (right by -n).
  static V Shift(V w, int n) {
    return n > 0 ? _mm512_slli_epi32(w, n) : n < 0 ? _mm512_srli_epi32(w, -n) : w;
  }

  /// Q4_K / Q5_K scales and mins of every row (Scales6 per lane): bytes
  /// 0-3 of sc[0] are scales 0-3, of sc[1] scales 4-7; mn likewise.
  __attribute__((always_inline)) static inline void Q45Scales(const uint8_t* sb, V sc[2],
                                                              V mn[2]) {
    const V u0 = Word(sb, 1), u1 = Word(sb, 2), u2 = Word(sb, 3);
    const V m3f = Set(0x3f3f3f3fu), m0f = Set(0x0f0f0f0fu), m03 = Set(0x03030303u);
    sc[0] = _mm512_and_si512(u0, m3f);
    sc[1] = _mm512_or_si512(_mm512_and_si512(u2, m0f),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), m03), 4));
    mn[0] = _mm512_and_si512(u1, m3f);
    mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m0f),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), m03), 4));
  }

  /// Q4_K / Q5_K codes of word i of chunk c: elements 64c + 4i .. + 3 (lo)
  /// and 64c + 32 + 4i .. + 3 (hi), with Q5_K's fifth bits.
  template <bool kQ5>
  __attribute__((always_inline)) static inline void Q45Codes(const uint8_t* sb, int c, int i, V* lo,
                                                             V* hi) {
    const V m0f = Set(0x0f0f0f0fu), m10 = Set(0x10101010u);
    const V q = Word(sb, (kQ5 ? 12 : 4) + 8 * c + i);
    if constexpr (kQ5) {
      const V h = Word(sb, 4 + i);
      *lo = Merge(q, _mm512_and_si512(Shift(h, 4 - 2 * c), m10));
      *hi = Merge(_mm512_srli_epi32(q, 4), _mm512_and_si512(Shift(h, 3 - 2 * c), m10));
    } else {
      *lo = _mm512_and_si512(q, m0f);
      *hi = _mm512_and_si512(_mm512_srli_epi32(q, 4), m0f);
    }
  }

  /// Q6_K unsigned codes (0..63) of word i of half h: c[m] holds elements
  /// 128h + 32m + 4i .. + 3.
  __attribute__((always_inline)) static inline void Q6Codes(const uint8_t* sb, int h, int i,
                                                            V c[4]) {
    const V m30 = Set(0x30303030u);
    const V wa = Word(sb, 16 * h + i), wb = Word(sb, 16 * h + 8 + i);
    const V wh = Word(sb, 32 + 8 * h + i);
    c[0] = Merge(wa, _mm512_and_si512(_mm512_slli_epi32(wh, 4), m30));
    c[1] = Merge(wb, _mm512_and_si512(_mm512_slli_epi32(wh, 2), m30));
    c[2] = Merge(_mm512_srli_epi32(wa, 4), _mm512_and_si512(wh, m30));
    c[3] = Merge(_mm512_srli_epi32(wb, 4), _mm512_and_si512(_mm512_srli_epi32(wh, 2), m30));
  }

  /// Q3_K: the biased scales 4g .. 4g + 3 (UnpackQ3KScales + 32) as the
  /// bytes of comb[g].
  __attribute__((always_inline)) static inline void Q3Scales(const uint8_t* sb, V comb[4]) {
    const V m03 = Set(0x03030303u), m0f = Set(0x0f0f0f0fu);
    const V w26 = Word(sb, 26);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const V low = _mm512_and_si512(Shift(Word(sb, 24 + g % 2), -4 * (g / 2)), m0f);
      const V high = _mm512_slli_epi32(_mm512_and_si512(Shift(w26, -2 * g), m03), 4);
      comb[g] = _mm512_or_si512(low, high);
    }
  }

  /// IQ4_XS: the signed scale of 32-element sub-block j (UnpackIq4XsScales)
  /// from words 0 (scales_h in the high half) and 1 (scales_l).
  static V Iq4Scale(V w0, V w1, int j) {
    const V low = _mm512_and_si512(Shift(w1, -(8 * (j / 2) + 4 * (j % 2))), Set(0x0f));
    const V high = _mm512_slli_epi32(_mm512_and_si512(Shift(w0, -(16 + 2 * j)), Set(0x03)), 4);
    return _mm512_sub_epi32(_mm512_or_si512(low, high), Set(32));
  }

  /// IQ4_XS biased codes (levels + 128) of word t of sub-block j: elements
  /// 32j + 4t .. + 3 (lo) and 32j + 16 + 4t .. + 3 (hi).
  __attribute__((always_inline)) static inline void Iq4Codes(const uint8_t* sb, int j, int t, V lut,
                                                             V* lo, V* hi) {
    const V m0f = Set(0x0f0f0f0fu);
    const V w = Word(sb, 2 + 4 * j + t);
    *lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(w, m0f));
    *hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi32(w, 4), m0f));
  }

  static V Iq4Lut() {
    return _mm512_broadcast_i32x4(
        _mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Biased.data())));
  }

  /// Q4_K (144 bytes: d|dmin, 12 scale bytes, 128 code bytes): words 0, 1-3,
  /// 4-35; Q5_K (176 bytes) has 32 high-bit bytes before the codes (words
  /// 4-11, codes 12-43). Code byte 32c + l holds element 64c + l (low
  /// nibble) and 64c + 32 + l (high), high-bit byte l their fifth bits (bits
  /// 2c, 2c + 1); 32-element sub-block k has scale / min k.
  template <bool kQ5>
  __attribute__((always_inline)) static inline void Q45K(const uint8_t* sb, const KActBlock* x,
                                                         V* a, V* b, __m512* dw, __m512* dm) {
    V sc[2], mn[2];
    Q45Scales(sb, sc, mn);
    V acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      V lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        V qlo, qhi;
        Q45Codes<kQ5>(sb, c, i, &qlo, &qhi);
        lo = _mm512_dpbusd_epi32(lo, qlo, X4(x, 64 * c + 4 * i));
        hi = _mm512_dpbusd_epi32(hi, qhi, X4(x, 64 * c + 32 + 4 * i));
      }
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(lo, Byte(sc[c / 2], (2 * c) % 4)));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(hi, Byte(sc[c / 2], (2 * c + 1) % 4)));
    }
    *a = acc;
    // B_s = sum_k mn_k * (bsum_2k + bsum_2k+1): mins 2q, 2q + 2 (and 2q + 1,
    // 2q + 3) as int16 pairs against pairs of 32-element activation sums.
    const auto bs32 = [&](int k) { return x->bsums[2 * k] + x->bsums[2 * k + 1]; };
    const V m00ff = Set(0x00ff00ffu);
    V bacc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const V even = _mm512_and_si512(mn[h], m00ff);
      const V odd = _mm512_and_si512(_mm512_srli_epi32(mn[h], 8), m00ff);
      bacc = _mm512_dpwssd_epi32(bacc, even, Pair(bs32(4 * h), bs32(4 * h + 2)));
      bacc = _mm512_dpwssd_epi32(bacc, odd, Pair(bs32(4 * h + 1), bs32(4 * h + 3)));
    }
    *b = bacc;
    const V w0 = Word(sb, 0);
    *dw = HalfLo(w0);
    *dm = HalfHi(w0);
  }

  /// Q2_K (84 bytes: 16 scale|min bytes, 64 code bytes, d, dmin): words 0-3,
  /// 4-19, 20. In half h, code byte 32h + l bits 2k .. 2k + 1 are element
  /// 128h + 32k + l; 16-element sub-block j has scale byte j (low nibble the
  /// scale, high the min).
  __attribute__((always_inline)) static inline void Q2K(const uint8_t* sb, const KActBlock* x, V* a,
                                                        V* b, __m512* dw, __m512* dm) {
    const V m0f = Set(0x0f0f0f0fu), m00ff = Set(0x00ff00ffu);
    V acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 2
        for (int q = 0; q < 2; ++q) {
          // The codes where they are (bits 2k .. 2k + 1: 4^k times the
          // code, at most 192), so sum = 4^k * isum and sc * sum >> 2k is
          // the exact sc * isum.
          V sum = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int i = 4 * q; i < 4 * q + 4; ++i) {
            const V c = _mm512_and_si512(Word(sb, 4 + 8 * h + i), Set(0x03030303u << (2 * k)));
            sum = _mm512_dpbusd_epi32(sum, c, X4(x, 128 * h + 32 * k + 4 * i));
          }
          const int j = 8 * h + 2 * k + q;
          const V scale = _mm512_and_si512(ByteToLane(Word(sb, j / 4), j % 4), Set(0x0f));
          acc = _mm512_add_epi32(acc, _mm512_srai_epi32(_mm512_mullo_epi32(sum, scale), 2 * k));
        }
      }
    }
    *a = acc;
    V bacc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const V mins = _mm512_and_si512(_mm512_srli_epi32(Word(sb, w), 4), m0f);
      const V even = _mm512_and_si512(mins, m00ff);
      const V odd = _mm512_and_si512(_mm512_srli_epi32(mins, 8), m00ff);
      const int16_t* bs = x->bsums + 4 * w;
      bacc = _mm512_dpwssd_epi32(bacc, even, Pair(bs[0], bs[2]));
      bacc = _mm512_dpwssd_epi32(bacc, odd, Pair(bs[1], bs[3]));
    }
    *b = bacc;
    const V w20 = Word(sb, 20);
    *dw = HalfLo(w20);
    *dm = HalfHi(w20);
  }

  /// Q3_K (110 bytes: 32 high-bit bytes, 64 code bytes, 12 scale bytes, f16
  /// d): words 0-7, 8-23, 24-26, d in the tail. In half h, code byte 32h + l
  /// bits 2k .. 2k + 1 and high-bit byte l bit 4h + k are element
  /// 128h + 32k + l, taken unsigned (0..7, the code + 4); 16-element
  /// sub-block j has the 6-bit scale j - 32 (UnpackQ3KScales):
  /// A_s = sum_j sc_j * isum_j - 4 * sum_j sc_j * bsum_j.
  __attribute__((always_inline)) static inline void Q3K(const uint8_t* sb, const KActBlock* x, V* a,
                                                        __m512* dw) {
    const V m00ff = Set(0x00ff00ffu);
    V comb[4];
    Q3Scales(sb, comb);
    V acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
#pragma GCC unroll 2
        for (int q = 0; q < 2; ++q) {
          // The code at bit p (2k, k = 3: 4 after one shift; at most 112),
          // so sum = 2^p * isum and sc * sum >> p is the exact sc * isum.
          const int p = k == 3 ? 4 : 2 * k;
          const V low_mask = Set(0x03030303u << p), high_mask = Set(0x04040404u << p);
          V sum = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int i = 4 * q; i < 4 * q + 4; ++i) {
            const V low = Shift(Word(sb, 8 + 8 * h + i), p - 2 * k);
            const V high = _mm512_and_si512(Shift(Word(sb, i), p + 2 - (4 * h + k)), high_mask);
            const V c = _mm512_ternarylogic_epi32(low, high, low_mask, 0xEC);  // (low & m) | high
            sum = _mm512_dpbusd_epi32(sum, c, X4(x, 128 * h + 32 * k + 4 * i));
          }
          const int j = 8 * h + 2 * k + q;
          const V scale = _mm512_sub_epi32(Byte(comb[j / 4], j % 4), Set(32));
          acc = _mm512_add_epi32(acc, _mm512_srai_epi32(_mm512_mullo_epi32(sum, scale), p));
        }
      }
    }
    V corr = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const V b32 = Set(0x00200020u);
      const V even = _mm512_sub_epi16(_mm512_and_si512(comb[g], m00ff), b32);
      const V odd = _mm512_sub_epi16(_mm512_and_si512(_mm512_srli_epi32(comb[g], 8), m00ff), b32);
      const int16_t* bs = x->bsums + 4 * g;
      corr = _mm512_dpwssd_epi32(corr, even, Pair(bs[0], bs[2]));
      corr = _mm512_dpwssd_epi32(corr, odd, Pair(bs[1], bs[3]));
    }
    *a = _mm512_sub_epi32(acc, _mm512_slli_epi32(corr, 2));
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 64 * 27)));
  }

  /// IQ4_XS (136 bytes: d|scales_h, scales_l, 128 code bytes): words 0, 1,
  /// 2-33. Code byte 16j + l holds element 32j + l (low nibble) and
  /// 32j + 16 + l (high), indices into kIq4nlValues taken + 128 (unsigned);
  /// 32-element sub-block j has the 6-bit scale j - 32 (UnpackIq4XsScales):
  /// A_s = sum_j sc_j * isum_j - 128 * sum_j sc_j * bsum_j.
  __attribute__((always_inline)) static inline void Iq4Xs(const uint8_t* sb, const KActBlock* x,
                                                          V* a, __m512* dw) {
    const V lut = Iq4Lut();
    const V w0 = Word(sb, 0), w1 = Word(sb, 1);
    V acc = _mm512_setzero_si512(), corr = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      V sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        V lo, hi;
        Iq4Codes(sb, j, t, lut, &lo, &hi);
        sum = _mm512_dpbusd_epi32(sum, lo, X4(x, 32 * j + 4 * t));
        sum = _mm512_dpbusd_epi32(sum, hi, X4(x, 32 * j + 16 + 4 * t));
      }
      const V scale = Iq4Scale(w0, w1, j);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(sum, scale));
      corr = _mm512_add_epi32(
          corr, _mm512_mullo_epi32(scale, Set(static_cast<uint32_t>(x->bsums[2 * j] +
                                                                    x->bsums[2 * j + 1]))));
    }
    *a = _mm512_sub_epi32(acc, _mm512_slli_epi32(corr, 7));
    *dw = HalfLo(w0);
  }

  /// Q6_K (210 bytes: 128 low-nibble bytes, 64 high-bit bytes, 16 int8
  /// scales, f16 d): words 0-31, 32-47, 48-51, d in the tail. In half h,
  /// ql byte 64h + l (l < 32) holds element 128h + l (low nibble) and
  /// 128h + 64 + l (high), ql byte 64h + 32 + l elements 128h + 32 + l and
  /// 128h + 96 + l, qh byte 32h + l bits 2m .. 2m + 1 the high bits of element
  /// 128h + 32m + l; 16-element sub-block j has scale j. Codes are taken
  /// unsigned (0..63): A_s = sum_j sc_j * isum_j - 32 * sum_j sc_j * bsum_j.
  __attribute__((always_inline)) static inline void Q6K(const uint8_t* sb, const KActBlock* x, V* a,
                                                        __m512* dw) {
    V acc = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {  // l in 16q .. 16q + 15: sub-blocks 8h + 2m + q
        V sum[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
#pragma GCC unroll 4
        for (int i = 4 * q; i < 4 * q + 4; ++i) {
          V c[4];
          Q6Codes(sb, h, i, c);
#pragma GCC unroll 4
          for (int m = 0; m < 4; ++m) {
            sum[m] = _mm512_dpbusd_epi32(sum[m], c[m], X4(x, 128 * h + 32 * m + 4 * i));
          }
        }
#pragma GCC unroll 4
        for (int m = 0; m < 4; ++m) {
          const int j = 8 * h + 2 * m + q;
          acc = _mm512_add_epi32(acc,
                                 _mm512_mullo_epi32(sum[m], SignedByte(Word(sb, 48 + j / 4), j % 4)));
        }
      }
    }
    // The offset: sum_j sc_j * bsum_j from int16 pairs (scales 4w, 4w + 2 and
    // 4w + 1, 4w + 3 of word 48 + w).
    V corr = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int w = 0; w < 4; ++w) {
      const V s = Word(sb, 48 + w);
      const V even = _mm512_srai_epi16(_mm512_slli_epi16(s, 8), 8);
      const V odd = _mm512_srai_epi16(s, 8);
      const int16_t* bs = x->bsums + 4 * w;
      corr = _mm512_dpwssd_epi32(corr, even, Pair(bs[0], bs[2]));
      corr = _mm512_dpwssd_epi32(corr, odd, Pair(bs[1], bs[3]));
    }
    *a = _mm512_sub_epi32(acc, _mm512_slli_epi32(corr, 5));
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 64 * 52)));
  }

  /// The tile (cpu_kquant.h KTile) of 16 rows' super-block at `sb`, taken
  /// straight from the words: each code vector the decode kernel dots is
  /// one tile row group (lane r: row r's 4 codes, as TileCodes makes them),
  /// the scales and mins per lane.
  template <DType T>
  __attribute__((always_inline)) static inline void PackTile(const uint8_t* sb, KTile& t) {
    const V m03 = Set(0x03030303u);
    auto codes = [&](int e, V c) { _mm512_store_si512(t.q[e / 4], TileCodes<T>(c)); };
    auto scale16 = [&](int j, V s) { _mm512_store_si512(t.sc[j], s); };
    auto min_pair = [&](int k, V lo, V hi) {
      _mm512_store_si512(t.mn[k], _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    };
    if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      V sc[2], mn[2];
      Q45Scales(sb, sc, mn);
      for (int c = 0; c < 4; ++c) {
        for (int i = 0; i < 8; ++i) {
          V lo, hi;
          Q45Codes<T == DType::kQ5_K>(sb, c, i, &lo, &hi);
          codes(64 * c + 4 * i, lo);
          codes(64 * c + 32 + 4 * i, hi);
        }
      }
      for (int k = 0; k < 8; ++k) {
        const V s = Byte(sc[k / 4], k % 4), m = Byte(mn[k / 4], k % 4);
        scale16(2 * k, s);
        scale16(2 * k + 1, s);
        min_pair(k, m, m);
      }
      const V w0 = Word(sb, 0);
      _mm512_store_ps(t.d, HalfLo(w0));
      _mm512_store_ps(t.dmin, HalfHi(w0));
    } else if constexpr (T == DType::kQ2_K) {
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 8; ++i) {
          const V w = Word(sb, 4 + 8 * h + i);
          for (int k = 0; k < 4; ++k) {
            codes(128 * h + 32 * k + 4 * i, _mm512_and_si512(Shift(w, -2 * k), m03));
          }
        }
      }
      for (int j = 0; j < 16; ++j) {
        const V b = ByteToLane(Word(sb, j / 4), j % 4);
        scale16(j, _mm512_and_si512(b, Set(0x0f)));
      }
      for (int k = 0; k < 8; ++k) {
        const V lo = _mm512_srli_epi32(ByteToLane(Word(sb, (2 * k) / 4), (2 * k) % 4), 4);
        const V hi = _mm512_srli_epi32(ByteToLane(Word(sb, (2 * k + 1) / 4), (2 * k + 1) % 4), 4);
        min_pair(k, lo, hi);
      }
      const V w20 = Word(sb, 20);
      _mm512_store_ps(t.d, HalfLo(w20));
      _mm512_store_ps(t.dmin, HalfHi(w20));
    } else if constexpr (T == DType::kQ3_K) {
      const V m04 = Set(0x04040404u);
      V comb[4];
      Q3Scales(sb, comb);
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          for (int i = 0; i < 8; ++i) {
            const V low = Shift(Word(sb, 8 + 8 * h + i), -2 * k);
            const V high = _mm512_and_si512(Shift(Word(sb, i), 2 - (4 * h + k)), m04);
            codes(128 * h + 32 * k + 4 * i, _mm512_ternarylogic_epi32(low, high, m03, 0xEC));
          }
        }
      }
      for (int j = 0; j < 16; ++j) scale16(j, _mm512_sub_epi32(Byte(comb[j / 4], j % 4), Set(32)));
      _mm512_store_ps(t.d,
                      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 64 * 27))));
      _mm512_store_ps(t.dmin, _mm512_setzero_ps());
    } else if constexpr (T == DType::kQ6_K) {
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 8; ++i) {
          V c[4];
          Q6Codes(sb, h, i, c);
          for (int m = 0; m < 4; ++m) codes(128 * h + 32 * m + 4 * i, c[m]);
        }
      }
      for (int j = 0; j < 16; ++j) scale16(j, SignedByte(Word(sb, 48 + j / 4), j % 4));
      _mm512_store_ps(t.d,
                      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 64 * 52))));
      _mm512_store_ps(t.dmin, _mm512_setzero_ps());
    } else {  // IQ4_XS
      const V lut = Iq4Lut();
      const V w0 = Word(sb, 0), w1 = Word(sb, 1);
      const V unbias = Set(0x80808080u);  // the decoder's value + 128 back to the value
      for (int j = 0; j < 8; ++j) {
        for (int k = 0; k < 4; ++k) {
          V lo, hi;
          Iq4Codes(sb, j, k, lut, &lo, &hi);
          codes(32 * j + 4 * k, _mm512_xor_si512(lo, unbias));
          codes(32 * j + 16 + 4 * k, _mm512_xor_si512(hi, unbias));
        }
        const V sc = Iq4Scale(w0, w1, j);
        scale16(2 * j, sc);
        scale16(2 * j + 1, sc);
      }
      _mm512_store_ps(t.d, HalfLo(w0));
      _mm512_store_ps(t.dmin, _mm512_setzero_ps());
    }
    FinishTile<T>(t);
  }

  static bool Supports(DType type) { return IsKQuantWeightType(type); }

  /// A_s (and B_s), the f32 d (and dmin) of 16 rows' super-block of type T.
  template <DType T>
  __attribute__((always_inline)) static inline void SuperBlock(const uint8_t* sb,
                                                               const KActBlock* x, V* a, V* b,
                                                               __m512* dw, __m512* dm) {
    if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
      Q45K<T == DType::kQ5_K>(sb, x, a, b, dw, dm);
    } else if constexpr (T == DType::kQ2_K) {
      Q2K(sb, x, a, b, dw, dm);
    } else if constexpr (T == DType::kQ3_K) {
      Q3K(sb, x, a, dw);
    } else if constexpr (T == DType::kQ6_K) {
      Q6K(sb, x, a, dw);
    } else {
      Iq4Xs(sb, x, a, dw);
    }
  }

  /// Decode prefetches this far ahead of the super-block it reads (one
  /// stream per thread; from memory, 4 KiB measured best of 4, 12 and 24
  /// KiB, and far better than none).
  static constexpr int64_t kPrefetchBytes = 4096;

  template <DType T>
  static void DotGroup(const uint8_t* group, int64_t superblocks, const KActs& x, float* y) {
    constexpr int64_t kTile = int64_t{kquant_impl::BlockBytes<T>()} * kInterleaveRows;
    const KActBlock* xr = x.Row(0);
    const float* dx = x.Scales(0);
    // acc[s % 16]: lane s % 16 of the 16 rows' float steps, transposed.
    __m512 acc[kKGroupBlocks];
    for (__m512& v : acc) v = _mm512_setzero_ps();
    for (int64_t s = 0; s < superblocks; ++s) {
      const uint8_t* sb = group + s * kTile;
      for (int64_t off = 0; off < kTile; off += 64) {
        __builtin_prefetch(sb + kPrefetchBytes + off);
      }
      const __m512 d = _mm512_set1_ps(dx[s]);
      __m512& lane = acc[s % kKGroupBlocks];
      V a, b;
      __m512 dw, dm;
      SuperBlock<T>(sb, xr + s, &a, &b, &dw, &dm);
      lane = _mm512_fmadd_ps(_mm512_mul_ps(dw, d), _mm512_cvtepi32_ps(a), lane);
      if constexpr (kquant_impl::HasMins<T>()) {
        const __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(
            _mm512_castps_si512(_mm512_mul_ps(dm, d)), _mm512_set1_epi32(INT32_MIN)));
        lane = _mm512_fmadd_ps(neg, _mm512_cvtepi32_ps(b), lane);
      }
    }
    // The lane tree (cpu_backend.h, step 3) between accumulators.
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_add_ps(acc[i], acc[i + 8]);
    for (int i = 0; i < 4; ++i) acc[i] = _mm512_add_ps(acc[i], acc[i + 4]);
    for (int i = 0; i < 2; ++i) acc[i] = _mm512_add_ps(acc[i], acc[i + 2]);
    _mm512_storeu_ps(y, _mm512_add_ps(acc[0], acc[1]));
  }

  /// pack_tile of a whole group: one KTile per super-block.
  static void PackGroup(DType type, const uint8_t* group, int64_t superblocks, KTile* out) {
    kquant_impl::KDispatch(type, [&](auto tag) {
      constexpr DType T = decltype(tag)::value;
      constexpr int64_t kTile = int64_t{kquant_impl::BlockBytes<T>()} * kInterleaveRows;
      for (int64_t s = 0; s < superblocks; ++s) {
        const uint8_t* sb = group + s * kTile;
        for (int64_t off = 0; off < kTile; off += 64) __builtin_prefetch(sb + kPrefetchBytes + off);
        PackTile<T>(sb, out[s]);
      }
    });
  }

  static void Dot(DType type, const uint8_t* group, int64_t superblocks, const KActs& x,
                  float* y) {
    kquant_impl::KDispatch(type, [&](auto tag) {
      DotGroup<decltype(tag)::value>(group, superblocks, x, y);
    });
  }
};

}  // namespace
}  // namespace odmoe
