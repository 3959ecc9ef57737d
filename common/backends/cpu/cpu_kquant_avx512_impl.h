// The AVX-512 K-family kernel type (internal), shared by cpu_kquant_avx512.cpp
// (AVX-512F/BW/VL) and cpu_kquant_avx512vnni.cpp (plus AVX512-VNNI); each
// includes it after its own target pragma, so it lives in an unnamed
// namespace (one copy per target, see cpu_kernels_avx512_impl.h).
//
// Codes are unpacked by cpu_kquant_x86_unpack.h; A_s takes 64 elements (four
// 16-element sub-blocks, one per 128-bit lane) at a time: _mm512_maddubs_epi16
// of the unsigned code (IQ4_XS: |w|, with w's sign moved onto x) times the
// activation, then the sub-block scales with _mm512_madd_epi16 (VNNI: fused
// into the accumulation by _mm512_dpwssd_epi32). The 16 float lanes are one
// zmm register.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "cpu_kquant_impl.h"
#include "cpu_kquant_x86_unpack.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): one copy per target, see above

/// Shuffle control: 128-bit lane L of the result gets int16 word L of the
/// (broadcast) 64-bit group of 4 scales, in every word.
alignas(64) constexpr uint8_t kScaleCtrl512[64] = {
    0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,  //
    4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,  //
    6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7};

template <bool kVnni>
struct KAvx512 : KUnpackX86 {
  using Vec = __m512;
  static constexpr int kTileNX = 4;
  using IPart = __m256i;

  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Load16(const float* p) { return _mm512_loadu_ps(p); }
  static Vec Mul(const Vec& a, const Vec& b) { return _mm512_mul_ps(a, b); }
  static Vec Neg(const Vec& a) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  static Vec Fma(const Vec& a, const Vec& b, const Vec& acc) { return _mm512_fmadd_ps(a, b, acc); }
  static Vec ToFloat(const int32_t* s) { return _mm512_cvtepi32_ps(_mm512_loadu_si512(s)); }
  static float Reduce(const Vec& a) {
    const __m256 hi8 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), hi8);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
  }

  __attribute__((always_inline)) static inline __m256i Fold(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  }

  /// Codes 64k .. 64k + 63 of a stored super-block, in element order, as
  /// KUnpacked::q holds them (the fused decode reads them without a store).
  template <DType T>
  __attribute__((always_inline)) static inline __m512i Codes64(const uint8_t* block, int k) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m2 = _mm512_set1_epi8(0x03);
    const __m512i m1 = _mm512_set1_epi8(0x01);
    // Shift counts per 16-bit word: a in the low 256 bits, b in the high.
    auto shifts = [](int a, int b) {
      return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)),
                                _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
    };
    auto bcast = [](const uint8_t* p) {
      return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    };
    if constexpr (T == DType::kQ4_K) {
      const auto& b = *reinterpret_cast<const BlockQ4K*>(block);
      return _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qs + 32 * k), shifts(0, 4)), m4);
    } else if constexpr (T == DType::kQ5_K) {
      const auto& b = *reinterpret_cast<const BlockQ5K*>(block);
      const __m512i lo =
          _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qs + 32 * k), shifts(0, 4)), m4);
      const __m512i hi =
          _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qh), shifts(2 * k, 2 * k + 1)), m1);
      return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    } else if constexpr (T == DType::kQ6_K) {
      const auto& b = *reinterpret_cast<const BlockQ6K*>(block);
      const int h = k / 2, half = k % 2;
      const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i lo = _mm512_and_si512(half ? _mm512_srli_epi16(ql, 4) : ql, m4);
      const __m512i hi = _mm512_and_si512(
          _mm512_srlv_epi16(bcast(b.qh + 32 * h), shifts(4 * half, 4 * half + 2)), m2);
      return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
    } else if constexpr (T == DType::kQ2_K) {
      const auto& b = *reinterpret_cast<const BlockQ2K*>(block);
      const int h = k / 2, s0 = 4 * (k % 2);
      return _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qs + 32 * h), shifts(s0, s0 + 2)), m2);
    } else if constexpr (T == DType::kQ3_K) {
      const auto& b = *reinterpret_cast<const BlockQ3K*>(block);
      const int h = k / 2, k0 = 2 * (k % 2);
      const __m512i lo =
          _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qs + 32 * h), shifts(2 * k0, 2 * k0 + 2)), m2);
      const __m512i hi = _mm512_and_si512(
          _mm512_srlv_epi16(bcast(b.hmask), shifts(4 * h + k0, 4 * h + k0 + 1)), m1);
      return _mm512_or_si512(lo, _mm512_slli_epi16(hi, 2));
    } else {  // IQ4_XS: 128-bit lanes [lo.0, hi.0, lo.1, hi.1] through the table
      const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
      const __m512i v = _mm512_and_si512(_mm512_srlv_epi16(bcast(b.qs + 32 * k), shifts(0, 4)), m4);
      const __m512i lut =
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
      return _mm512_shuffle_epi8(lut, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0)));
    }
  }

  /// A_s / B_s partials of one super-block whose codes `codes(k)` gives (64
  /// at a time) and whose scales are in w (w.q is not read).
  template <DType T, int NX, class Codes>
  __attribute__((always_inline)) static inline void DotWith(const Codes& codes, const KUnpacked& w,
                                                            const KActBlock* const* x, IPart* a,
                                                            IPart* b) {
    constexpr bool kSigned = T == DType::kIQ4_XS;
    // Two accumulators per row (even and odd k): two shorter dependency
    // chains, so consecutive super-blocks overlap better in decode.
    __m512i acc[2][NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_si512();
    const __m512i ctrl = _mm512_load_si512(kScaleCtrl512);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      int64_t sc4;
      std::memcpy(&sc4, w.sc + 4 * k, sizeof(sc4));
      const __m512i scv = _mm512_shuffle_epi8(_mm512_set1_epi64(sc4), ctrl);
      const __m512i wq = codes(k);
      __m512i uw = wq;
      __mmask64 neg = 0;
      if constexpr (kSigned) {
        uw = _mm512_abs_epi8(wq);
        neg = _mm512_movepi8_mask(wq);
      }
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) {
        __m512i xv = _mm512_load_si512(x[t]->qs + 64 * k);
        if constexpr (kSigned) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
        const __m512i p = _mm512_maddubs_epi16(uw, xv);
        __m512i& c = acc[k % 2][t];
        if constexpr (kVnni) {
          c = _mm512_dpwssd_epi32(c, p, scv);
        } else {
          c = _mm512_add_epi32(c, _mm512_madd_epi16(p, scv));
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[t]->bsums));
      __m256i s = Fold(_mm512_add_epi32(acc[0][t], acc[1][t]));
      if constexpr (T == DType::kQ3_K || T == DType::kQ6_K) {
        s = _mm256_add_epi32(
            s, _mm256_madd_epi16(bs, _mm256_load_si256(reinterpret_cast<const __m256i*>(w.corr))));
      }
      a[t] = s;
      if constexpr (kquant_impl::HasMins<T>()) {
        b[t] = _mm256_madd_epi16(bs, _mm256_load_si256(reinterpret_cast<const __m256i*>(w.mn)));
      }
    }
  }

  template <DType T, int NX>
  __attribute__((always_inline)) static inline void Dot(const KUnpacked& w,
                                                        const KActBlock* const* x, IPart* a,
                                                        IPart* b) {
    // Two 256-bit loads: in decode they forward from the unpacker's 256-bit
    // stores (one 512-bit load over two stores would stall).
    auto codes = [&](int k) {
      return _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(w.q + 64 * k))),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(w.q + 64 * k + 32)), 1);
    };
    DotWith<T, NX>(codes, w, x, a, b);
  }

  /// Decode: the dot of a stored super-block, its codes kept in registers
  /// (scales: UnpackScales into `scratch` first).
  static constexpr bool kFusedDecode = true;
  template <DType T>
  __attribute__((always_inline)) static inline void DotStored(const uint8_t* block,
                                                              const KUnpacked& scales,
                                                              const KActBlock* x, IPart* a,
                                                              IPart* b) {
    if constexpr (T == DType::kIQ4_XS && kVnni) {
      DotIq4XsBiased(block, scales, x, a);
    } else {
      const KActBlock* xs[1] = {x};
      DotWith<T, 1>([&](int k) { return Codes64<T>(block, k); }, scales, xs, a, b);
    }
  }

  /// IQ4_XS with VNNI: the levels + 128 (unsigned, 1..241) through vpdpbusd,
  /// so no sign trick per chunk; each 32-element sub-block's four-element
  /// sums are scaled by vpmulld, and A_s subtracts 128 * sum_j sc_j * bsum_j.
  /// The same exact integer A_s as DotWith.
  __attribute__((always_inline)) static inline void DotIq4XsBiased(const uint8_t* block,
                                                                   const KUnpacked& scales,
                                                                   const KActBlock* x, IPart* a) {
    const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
    // The IQ4_NL levels + 128 as unsigned bytes.
    alignas(16) static constexpr std::array<uint8_t, 16> kBiased = [] {
      std::array<uint8_t, 16> t{};
      for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
      return t;
    }();
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.data())));
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i shifts = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m256i sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales.sc));
    const __m512i sc32 = _mm512_cvtepi16_epi32(sc16);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i v =
          _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                                 reinterpret_cast<const __m256i*>(b.qs + 32 * k))),
                                             shifts),
                           m4);
      const __m512i codes =
          _mm512_shuffle_epi8(lut, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0)));
      const __m512i dot =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, _mm512_load_si512(x->qs + 64 * k));
      // Lanes 0-7: sub-block 2k (16-entry scale 4k), lanes 8-15: 2k + 1 (4k + 2).
      const __m512i idx =
          _mm512_inserti64x4(_mm512_set1_epi32(4 * k), _mm256_set1_epi32(4 * k + 2), 1);
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(dot, _mm512_permutexvar_epi32(idx, sc32)));
    }
    const __m256i bs = _mm256_load_si256(reinterpret_cast<const __m256i*>(x->bsums));
    const __m256i corr = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), sc16), 7);
    *a = _mm256_add_epi32(Fold(acc), _mm256_madd_epi16(bs, corr));
  }
};

}  // namespace
}  // namespace odmoe
