// The AVX-512 vector type of the CPU kernels (internal), shared by
// cpu_kernels_avx512.cpp (AVX-512F/BW/VL) and cpu_kernels_avx512vnni.cpp (the
// same plus AVX512-VNNI). Each includes it after its own target pragma, so the
// struct lives in an unnamed namespace: every translation unit gets its own
// copy compiled for its own target, and no inline function compiled with
// VNNI can be picked by the linker for the plain AVX-512 table.
//
// The 16 canonical lanes are one zmm register. The quantized dot takes the
// exact sums of 16 blocks at once from interleaved slices (cpu_qdot.h): with
// VNNI, _mm512_dpbusd_epi32 of unsigned codes (Q8_0 / IQ4_NL: w + 128; the
// 4- and 5-bit types: their codes or code + 8 / + 16) times x (signed),
// corrected by the offset times the activation block's code sum; without,
// _mm512_maddubs_epi16 of |w| times x with w's sign for the signed types (no
// saturation: 2 * 128 * 127 < 2^15) or of the unsigned codes (<= 31) times
// x, then _mm512_madd_epi16. IQ4_NL / MXFP4 values come from a 16-entry
// _mm512_shuffle_epi8 lookup, Q5_x's fifth bits from the gathered qh words.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_kernels_impl.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): one copy per target, see above

template <bool kVnni>
struct Avx512V {
  using Vec = __m512;
  using IVec = __m512i;
  static constexpr int kTileNW = 4;
  static constexpr int kTileNX = 4;
  static constexpr int kQTileNX = 2;

  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Broadcast(float a) { return _mm512_set1_ps(a); }
  static Vec Load16(const float* p) { return _mm512_loadu_ps(p); }
  static void Store16(const Vec& v, float* p) { _mm512_storeu_ps(p, v); }
  static Vec Fma(const Vec& w, const Vec& x, const Vec& acc) { return _mm512_fmadd_ps(w, x, acc); }
  static float Reduce(const Vec& a) {
    const __m256 hi8 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), hi8);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
  }
  static __m512 Bf16x16(const uint8_t* p) {
    const __m512i u =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
  static __m512 F16x16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  /// The block's f16 scale in every lane (F16C: exact, equal to F16ToF32).
  static __m512 Scale(const uint8_t* block) {
    int16_t d;
    std::memcpy(&d, block, sizeof(d));
    return _mm512_cvtph_ps(_mm256_set1_epi16(d));
  }
  template <DType T>
  static void LoadW32(const uint8_t* row, int64_t blk, Vec& a, Vec& b) {
    if constexpr (T == DType::kF32) {
      const float* p = reinterpret_cast<const float*>(row) + 32 * blk;
      a = _mm512_loadu_ps(p);
      b = _mm512_loadu_ps(p + 16);
    } else if constexpr (T == DType::kF16) {
      a = F16x16(row + 64 * blk);
      b = F16x16(row + 64 * blk + 32);
    } else if constexpr (T == DType::kBF16) {
      a = Bf16x16(row + 64 * blk);
      b = Bf16x16(row + 64 * blk + 32);
    } else if constexpr (T == DType::kQ8_0) {
      const uint8_t* block = row + kQ8_0BlockBytes * blk;
      const __m512 d = Scale(block);
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
      a = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
      b = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
    } else {
      const uint8_t* block = row + kQ4_0BlockBytes * blk;
      const __m512 d = Scale(block);
      const __m512i q =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
      const __m512i eight = _mm512_set1_epi32(8);
      const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0f)), eight);
      const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
      a = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d);
      b = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d);
    }
  }

  /// cpu_math::ExpF on 16 lanes: the same operations in the same order.
  ODMOE_CPU_INLINE static __m512 Exp(__m512 x) {
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f));
    const __mmask16 neg = _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 half = _mm512_mask_blend_ps(neg, _mm512_set1_ps(0.5f), _mm512_set1_ps(-0.5f));
    const __m512i ni = _mm512_cvttps_epi32(_mm512_add_ps(t, half));
    const __m512 n = _mm512_cvtepi32_ps(ni);
    const __m512 r =
        _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(cpu_math::kExpLn2Hi))),
                      _mm512_mul_ps(n, _mm512_set1_ps(cpu_math::kExpLn2Lo)));
    __m512 p = _mm512_set1_ps(cpu_math::kExpPoly[0]);
    for (int i = 1; i < 8; ++i) {
      p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(cpu_math::kExpPoly[i]));
    }
    // n1 = ni / 2 rounded toward zero, as C++ integer division.
    const __m512i n1 = _mm512_srai_epi32(_mm512_add_epi32(ni, _mm512_srli_epi32(ni, 31)), 1);
    const __m512i n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 pow1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const __m512 pow2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, pow1), pow2);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu_math::kExpMin), _CMP_LT_OQ),
                             y, _mm512_setzero_ps());
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(cpu_math::kExpMax), _CMP_GT_OQ),
                             y, _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
  }
  static Vec Silu(const Vec& x) {
    const __m512 e = Exp(_mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  }

  // ---- Quantized dot ----
  static Vec Mul(const Vec& a, const Vec& b) { return _mm512_mul_ps(a, b); }
  static Vec ToFloat(const IVec& s) { return _mm512_cvtepi32_ps(s); }
  /// Transposes the 4x4 dwords of each 128-bit lane of a, b, c, d: a gets
  /// dword 0 of each input, b dword 1, and so on.
  ODMOE_CPU_INLINE static void Transpose4(__m512i& a, __m512i& b, __m512i& c, __m512i& d) {
    const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
    const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
    a = _mm512_unpacklo_epi64(t0, t2);
    b = _mm512_unpackhi_epi64(t0, t2);
    c = _mm512_unpacklo_epi64(t1, t3);
    d = _mm512_unpackhi_epi64(t1, t3);
  }
  ODMOE_CPU_INLINE static __m512i Load2x256(const uint8_t* lo, const uint8_t* hi) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi));
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
  ODMOE_CPU_INLINE static __m128i Load128(const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  /// How a type's codes sit in the slices: Q8_0 and IQ4_NL without VNNI
  /// signed (maddubs takes |w| with w's sign moved to x); every other case
  /// unsigned, code + 2^shift corrected by -(sum(x) << shift) (-1: the code
  /// itself). With VNNI the signed types are stored as w + 128 (w ^ 0x80).
  template <DType T>
  static constexpr bool SignedCodes() {
    return !kVnni && (T == DType::kQ8_0 || T == DType::kIQ4_NL);
  }
  template <DType T>
  static constexpr int CodeShift() {
    if constexpr (T == DType::kQ8_0 || T == DType::kIQ4_NL) return kVnni ? 7 : -1;
    return T == DType::kQ4_0 ? 3 : (T == DType::kQ5_0 || T == DType::kMXFP4) ? 4 : -1;
  }
  /// The 16 dwords at p, p + stride, ... p + 15 * stride: scalar loads
  /// inserted lane by lane (a vpgatherdd took a quarter of the Q5_0 decode
  /// kernel's time on Zen 4).
  ODMOE_CPU_INLINE static __m512i LoadStrided32(const uint8_t* p, int stride) {
    auto word = [&](int j) {
      int32_t v;
      std::memcpy(&v, p + j * stride, sizeof(v));
      return v;
    };
    auto quad = [&](int j) { return _mm_setr_epi32(word(j), word(j + 1), word(j + 2), word(j + 3)); };
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(quad(0)), quad(4), 1);
    const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(quad(8)), quad(12), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  /// Adds 16 to the byte of each element whose fifth bit (qh, the LE dword at
  /// `qh` of each of the 16 blocks, `stride` apart) is set: slice m holds
  /// elements 4m..4m+3, i.e. bits 4m..4m+3, found in byte m / 2 of qh.
  ODMOE_CPU_INLINE static void AddFifthBits(const uint8_t* qh, int stride, __m512i s[8]) {
    const __m512i h = LoadStrided32(qh, stride);
    const __m512i sixteen = _mm512_set1_epi8(16);
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const int b = m / 2;  // byte b of each dword to all four of its bytes
      const __m512i ctrl = _mm512_broadcast_i32x4(_mm_setr_epi32(
          0x01010101 * b, 0x01010101 * (4 + b), 0x01010101 * (8 + b), 0x01010101 * (12 + b)));
      const __m512i bit = _mm512_set1_epi32(m % 2 == 0 ? 0x08040201 : static_cast<int>(0x80402010));
      const __mmask64 set = _mm512_test_epi8_mask(_mm512_shuffle_epi8(h, ctrl), bit);
      s[m] = _mm512_mask_add_epi8(s[m], set, s[m], sixteen);
    }
  }
  /// The 8 interleaved slices of 16 stored blocks: s[m] dword j = codes
  /// 4m..4m+3 of block j, encoded as SignedCodes / CodeShift say: Q8_0
  /// w ^ 0x80 (VNNI) or w; Q4_0 the nibbles (code + 8); Q4_1 / Q5_1 the
  /// codes; Q5_0 the 5-bit codes (code + 16); IQ4_NL the looked-up values
  /// (^ 0x80 with VNNI); MXFP4 the looked-up values + 16.
  template <DType T>
  ODMOE_CPU_INLINE static void LoadGroup(const uint8_t* blocks, __m512i s[8]) {
    constexpr QLayout kL = QLayoutOf(T);
    constexpr int kB = kL.bytes;
    const uint8_t* q = blocks + kL.qs;
    if constexpr (T == DType::kQ8_0) {
      __m512i c[8];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        c[v] = Load2x256(q + v * kB, q + (v + 4) * kB);             // blocks v, v + 4
        c[4 + v] = Load2x256(q + (v + 8) * kB, q + (v + 12) * kB);  // v + 8, v + 12
      }
      // Lanes of c[m]: blocks 0-3 dword m, 0-3 dword 4+m, 4-7 dword m, 4-7
      // dword 4+m; of c[4+m] the same for blocks 8-15.
      Transpose4(c[0], c[1], c[2], c[3]);
      Transpose4(c[4], c[5], c[6], c[7]);
      const __m512i flip = _mm512_set1_epi8(kVnni ? -128 : 0);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        s[m] = _mm512_shuffle_i64x2(c[m], c[4 + m], _MM_SHUFFLE(2, 0, 2, 0));
        s[4 + m] = _mm512_shuffle_i64x2(c[m], c[4 + m], _MM_SHUFFLE(3, 1, 3, 1));
        if constexpr (kVnni) {
          s[m] = _mm512_xor_si512(s[m], flip);
          s[4 + m] = _mm512_xor_si512(s[4 + m], flip);
        }
      }
    } else {
      __m512i c[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {  // blocks v, v + 4, v + 8, v + 12
        __m512i r = _mm512_castsi128_si512(Load128(q + v * kB));
        r = _mm512_inserti32x4(r, Load128(q + (v + 4) * kB), 1);
        r = _mm512_inserti32x4(r, Load128(q + (v + 8) * kB), 2);
        c[v] = _mm512_inserti32x4(r, Load128(q + (v + 12) * kB), 3);
      }
      Transpose4(c[0], c[1], c[2], c[3]);  // lane L, dword p: block 4L + p
      const __m512i mask = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        s[m] = _mm512_and_si512(c[m], mask);
        s[4 + m] = _mm512_and_si512(_mm512_srli_epi16(c[m], 4), mask);
      }
      if constexpr (kL.qh >= 0) AddFifthBits(blocks + kL.qh, kB, s);
      if constexpr (T == DType::kIQ4_NL || T == DType::kMXFP4) {
        const int8_t* values = T == DType::kIQ4_NL ? kIq4nlValues : kMxfp4Values;
        __m512i table = _mm512_broadcast_i32x4(Load128(reinterpret_cast<const uint8_t*>(values)));
        if constexpr (T == DType::kMXFP4) {
          table = _mm512_add_epi8(table, _mm512_set1_epi8(16));
        } else if constexpr (kVnni) {
          table = _mm512_xor_si512(table, _mm512_set1_epi8(-128));
        }
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) s[m] = _mm512_shuffle_epi8(table, s[m]);
      }
    }
  }
  /// Exact block sums of the slices s with the activation group x.
  template <DType T>
  ODMOE_CPU_INLINE static __m512i Dot(const __m512i s[8], const QActGroup& x) {
    // The codes in s are q + 2^shift: start from -(sum(x) << shift).
    constexpr int kShift = CodeShift<T>();
    __m512i acc = _mm512_setzero_si512();
    if constexpr (kShift >= 0) {
      acc = _mm512_sub_epi32(acc, _mm512_slli_epi32(_mm512_load_si512(x.sum), kShift));
    }
    if constexpr (kVnni) {
      __m512i acc2 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int m = 0; m < 8; m += 2) {
        acc = _mm512_dpbusd_epi32(acc, s[m], _mm512_load_si512(x.qs + 64 * m));
        acc2 = _mm512_dpbusd_epi32(acc2, s[m + 1], _mm512_load_si512(x.qs + 64 * m + 64));
      }
      return _mm512_add_epi32(acc, acc2);
    } else {
      const __m512i ones = _mm512_set1_epi16(1);
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        __m512i xm = _mm512_load_si512(x.qs + 64 * m);
        __m512i wm = s[m];
        if constexpr (SignedCodes<T>()) {  // |w| times x with the sign of w
          xm = _mm512_mask_sub_epi8(xm, _mm512_movepi8_mask(wm), _mm512_setzero_si512(), xm);
          wm = _mm512_abs_epi8(wm);
        }
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(wm, xm), ones));
      }
      return acc;
    }
  }
  /// The f16 at byte kOffset of each of 16 blocks, decoded.
  template <DType T, int kOffset>
  ODMOE_CPU_INLINE static Vec GroupHalves(const uint8_t* blocks) {
    // The dword at kOffset rounded down to 4 (every block has 17 bytes or
    // more): d and m of Q4_1 / Q5_1 come from the same loads.
    constexpr int kB = cpu_impl::QBlockBytes<T>();
    static_assert(kOffset % 2 == 0 && kOffset < 4);
    __m512i w = LoadStrided32(blocks, kB);
    if constexpr (kOffset == 2) w = _mm512_srli_epi32(w, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w));
  }
  /// E8M0Half of byte 0 of each of 16 blocks: (e - 1) << 23, or
  /// 0x00200000 << e for e < 2 (the subnormals).
  template <DType T>
  ODMOE_CPU_INLINE static Vec E8M0Scales(const uint8_t* blocks) {
    constexpr int kB = cpu_impl::QBlockBytes<T>();
    const __m512i e = _mm512_and_si512(LoadStrided32(blocks, kB), _mm512_set1_epi32(0xff));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, tiny));
  }
  static Vec IntsToFloat(const int32_t* p) { return _mm512_cvtepi32_ps(_mm512_loadu_si512(p)); }
  template <DType T>
  ODMOE_CPU_INLINE static IVec GroupDot(const uint8_t* blocks, const QActGroup& x) {
    __m512i s[8];
    LoadGroup<T>(blocks, s);
    return Dot<T>(s, x);
  }
  template <DType T>
  ODMOE_CPU_INLINE static void PackCodes(const uint8_t* blocks, QWeightGroup* out) {
    __m512i s[8];
    LoadGroup<T>(blocks, s);
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) _mm512_store_si512(out->qs + 64 * m, s[m]);
  }
  template <DType T, int NX>
  ODMOE_CPU_INLINE static void PackedDots(const QWeightGroup& w, const QActGroup* const* x,
                                          IVec* sums) {
    __m512i s[8];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) s[m] = _mm512_load_si512(w.qs + 64 * m);
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) sums[t] = Dot<T>(s, *x[t]);
  }
};

}  // namespace
}  // namespace odmoe
