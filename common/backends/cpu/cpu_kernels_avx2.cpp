// AVX2 + FMA + F16C kernels: the 16 canonical lanes live in two 8-lane
// registers (lo: lanes 0-7, hi: lanes 8-15). The quantized dot takes the
// block sums with _mm256_maddubs_epi16 (signed codes: |w| times x with w's
// sign, so that a Q8_0 code of -128 cannot saturate: 2 * 128 * 127 < 2^15;
// the 4- and 5-bit codes as unsigned bytes <= 31, IQ4_NL / MXFP4 values
// looked up with _mm256_shuffle_epi8) and _mm256_madd_epi16, one half group
// (8 blocks) at a time.
#include "cpu_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

// Everything the kernel code includes comes before the target pragma, so that
// no shared inline function is compiled for this ISA only.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_math.h"
#include "cpu_qdot.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "cpu_kernels_impl.h"

namespace odmoe {
namespace {

struct Avx2V {
  struct Vec {
    __m256 lo, hi;
  };
  struct IVec {
    __m256i lo, hi;
  };
  static constexpr int kTileNW = 2;
  static constexpr int kTileNX = 2;
  static constexpr int kQTileNX = 2;

  static Vec Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Vec Broadcast(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
  static Vec Load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void Store16(const Vec& v, float* p) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  static Vec Fma(const Vec& w, const Vec& x, const Vec& acc) {
    return {_mm256_fmadd_ps(w.lo, x.lo, acc.lo), _mm256_fmadd_ps(w.hi, x.hi, acc.hi)};
  }
  static float Reduce(const Vec& a) {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
  }
  static __m256 Bf16x8(const uint8_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  static __m256 F16x8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float Scale(const uint8_t* block) {
    uint16_t d;
    std::memcpy(&d, block, sizeof(d));
    return _cvtsh_ss(d);  // F16C: exact, same value as F16ToF32
  }
  template <DType T>
  static void LoadW32(const uint8_t* row, int64_t blk, Vec& a, Vec& b) {
    if constexpr (T == DType::kF32) {
      const float* p = reinterpret_cast<const float*>(row) + 32 * blk;
      a = Load16(p);
      b = Load16(p + 16);
    } else if constexpr (T == DType::kF16) {
      const uint8_t* p = row + 64 * blk;
      a = {F16x8(p), F16x8(p + 16)};
      b = {F16x8(p + 32), F16x8(p + 48)};
    } else if constexpr (T == DType::kBF16) {
      const uint8_t* p = row + 64 * blk;
      a = {Bf16x8(p), Bf16x8(p + 16)};
      b = {Bf16x8(p + 32), Bf16x8(p + 48)};
    } else if constexpr (T == DType::kQ8_0) {
      const uint8_t* block = row + kQ8_0BlockBytes * blk;
      const __m256 d = _mm256_set1_ps(Scale(block));
      auto q8 = [&](int off) {
        const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + off));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d);
      };
      a = {q8(0), q8(8)};
      b = {q8(16), q8(24)};
    } else {
      const uint8_t* block = row + kQ4_0BlockBytes * blk;
      const __m256 d = _mm256_set1_ps(Scale(block));
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      const __m128i mask = _mm_set1_epi8(0x0f);
      const __m128i lo = _mm_and_si128(q, mask);
      const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
      const __m256i eight = _mm256_set1_epi32(8);
      auto q4 = [&](__m128i v) {
        const __m256i i = _mm256_sub_epi32(_mm256_cvtepu8_epi32(v), eight);
        return _mm256_mul_ps(_mm256_cvtepi32_ps(i), d);
      };
      a = {q4(lo), q4(_mm_srli_si128(lo, 8))};
      b = {q4(hi), q4(_mm_srli_si128(hi, 8))};
    }
  }

  /// cpu_math::ExpF on 8 lanes: the same operations in the same order.
  ODMOE_CPU_INLINE static __m256 Exp8(__m256 x) {
    const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504f));
    const __m256 neg = _mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 half = _mm256_blendv_ps(_mm256_set1_ps(0.5f), _mm256_set1_ps(-0.5f), neg);
    const __m256i ni = _mm256_cvttps_epi32(_mm256_add_ps(t, half));
    const __m256 n = _mm256_cvtepi32_ps(ni);
    const __m256 r =
        _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(cpu_math::kExpLn2Hi))),
                      _mm256_mul_ps(n, _mm256_set1_ps(cpu_math::kExpLn2Lo)));
    __m256 p = _mm256_set1_ps(cpu_math::kExpPoly[0]);
    for (int i = 1; i < 8; ++i) {
      p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(cpu_math::kExpPoly[i]));
    }
    // n1 = ni / 2 rounded toward zero, as C++ integer division.
    const __m256i n1 = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 pow1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 pow2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, pow1), pow2);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(cpu_math::kExpMin), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY),
                         _mm256_cmp_ps(x, _mm256_set1_ps(cpu_math::kExpMax), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  ODMOE_CPU_INLINE static __m256 Silu8(__m256 x) {
    const __m256 e = Exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  }
  static Vec Silu(const Vec& x) { return {Silu8(x.lo), Silu8(x.hi)}; }

  // ---- Quantized dot ----
  static Vec Mul(const Vec& a, const Vec& b) {
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
  }
  static Vec ToFloat(const IVec& s) { return {_mm256_cvtepi32_ps(s.lo), _mm256_cvtepi32_ps(s.hi)}; }
  /// Transposes the 4x4 dwords of each 128-bit lane of a, b, c, d: a gets
  /// dword 0 of each input, b dword 1, and so on.
  ODMOE_CPU_INLINE static void Transpose4(__m256i& a, __m256i& b, __m256i& c, __m256i& d) {
    const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
    a = _mm256_unpacklo_epi64(t0, t2);
    b = _mm256_unpackhi_epi64(t0, t2);
    c = _mm256_unpacklo_epi64(t1, t3);
    d = _mm256_unpackhi_epi64(t1, t3);
  }
  /// Q8_0 and IQ4_NL codes are signed: maddubs takes |w| and moves w's sign
  /// to x. The other types' slices hold code + 2^shift (-1: the code itself,
  /// unsigned), corrected by -(sum(x) << shift).
  template <DType T>
  static constexpr bool SignedCodes() {
    return T == DType::kQ8_0 || T == DType::kIQ4_NL;
  }
  template <DType T>
  static constexpr int CodeShift() {
    return T == DType::kQ4_0 ? 3 : (T == DType::kQ5_0 || T == DType::kMXFP4) ? 4 : -1;
  }
  /// The 8 dwords at p, p + stride, ... p + 7 * stride: scalar loads inserted
  /// lane by lane (faster than vpgatherdd on the AMD cores measured).
  ODMOE_CPU_INLINE static __m256i LoadStrided32(const uint8_t* p, int stride) {
    auto word = [&](int j) {
      int32_t v;
      std::memcpy(&v, p + j * stride, sizeof(v));
      return v;
    };
    const __m128i lo = _mm_setr_epi32(word(0), word(1), word(2), word(3));
    const __m128i hi = _mm_setr_epi32(word(4), word(5), word(6), word(7));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  /// Adds 16 to the byte of each element whose fifth bit (qh, the LE dword at
  /// `qh` of each of the 8 blocks, `stride` apart) is set: slice m holds
  /// elements 4m..4m+3, i.e. bits 4m..4m+3, found in byte m / 2 of qh.
  ODMOE_CPU_INLINE static void AddFifthBits(const uint8_t* qh, int stride, __m256i s[8]) {
    const __m256i h = LoadStrided32(qh, stride);
    const __m256i sixteen = _mm256_set1_epi8(16);
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const int b = m / 2;  // byte b of each dword to all four of its bytes
      const __m256i ctrl = _mm256_setr_epi32(
          0x01010101 * b, 0x01010101 * (4 + b), 0x01010101 * (8 + b), 0x01010101 * (12 + b),
          0x01010101 * b, 0x01010101 * (4 + b), 0x01010101 * (8 + b), 0x01010101 * (12 + b));
      const __m256i bit = _mm256_set1_epi32(m % 2 == 0 ? 0x08040201 : static_cast<int>(0x80402010));
      const __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(h, ctrl), bit);
      s[m] = _mm256_or_si256(s[m], _mm256_and_si256(_mm256_cmpeq_epi8(t, bit), sixteen));
    }
  }
  /// The 8 interleaved slices of 8 stored blocks: s[m] dword j = codes
  /// 4m..4m+3 of block j. Q8_0: the signed codes; the 4- and 5-bit types:
  /// the codes (Q4_1, Q5_1), code + 8 (Q4_0), code + 16 (Q5_0, MXFP4's
  /// looked-up values) or IQ4_NL's looked-up signed values.
  template <DType T>
  ODMOE_CPU_INLINE static void LoadHalf(const uint8_t* blocks, __m256i s[8]) {
    constexpr QLayout kL = QLayoutOf(T);
    constexpr int kB = kL.bytes;
    const uint8_t* q = blocks + kL.qs;
    if constexpr (T == DType::kQ8_0) {
      __m256i c[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        c[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + j * kB));
      Transpose4(c[0], c[1], c[2], c[3]);  // lane 0: blocks 0-3 dword m, lane 1: dword 4+m
      Transpose4(c[4], c[5], c[6], c[7]);  // the same for blocks 4-7
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        s[m] = _mm256_permute2x128_si256(c[m], c[4 + m], 0x20);
        s[4 + m] = _mm256_permute2x128_si256(c[m], c[4 + m], 0x31);
      }
    } else {
      __m256i c[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {  // blocks v and v + 4
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + v * kB));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + (v + 4) * kB));
        c[v] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
      }
      Transpose4(c[0], c[1], c[2], c[3]);
      const __m256i mask = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        s[m] = _mm256_and_si256(c[m], mask);
        s[4 + m] = _mm256_and_si256(_mm256_srli_epi16(c[m], 4), mask);
      }
      if constexpr (kL.qh >= 0) AddFifthBits(blocks + kL.qh, kB, s);
      if constexpr (T == DType::kIQ4_NL || T == DType::kMXFP4) {
        const int8_t* values = T == DType::kIQ4_NL ? kIq4nlValues : kMxfp4Values;
        __m256i table =
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
        if constexpr (T == DType::kMXFP4) table = _mm256_add_epi8(table, _mm256_set1_epi8(16));
#pragma GCC unroll 8
        for (int m = 0; m < 8; ++m) s[m] = _mm256_shuffle_epi8(table, s[m]);
      }
    }
  }
  /// Exact block sums of 8 blocks (slices s) with activation codes at
  /// `xq` (slice m at xq + 64 m); sum8: the activation blocks' code sums.
  template <DType T>
  ODMOE_CPU_INLINE static __m256i HalfDot(const __m256i s[8], const int8_t* xq,
                                          const int32_t* sum8) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    if constexpr (CodeShift<T>() >= 0) {  // subtract the offset times sum(x)
      const __m256i sx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sum8));
      acc = _mm256_sub_epi32(acc, _mm256_slli_epi32(sx, CodeShift<T>()));
    }
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 64 * m));
      __m256i p;
      if constexpr (SignedCodes<T>()) {
        p = _mm256_maddubs_epi16(_mm256_abs_epi8(s[m]), _mm256_sign_epi8(x, s[m]));
      } else {
        p = _mm256_maddubs_epi16(s[m], x);
      }
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    return acc;
  }
  /// The f16 at byte kOffset of 8 blocks, decoded.
  template <DType T, int kOffset>
  ODMOE_CPU_INLINE static __m256 HalfHalves(const uint8_t* blocks) {
    constexpr int kB = cpu_impl::QBlockBytes<T>();
    // Each dword's low half is the block's f16.
    __m256i d = LoadStrided32(blocks + kOffset, kB);
    d = _mm256_and_si256(d, _mm256_set1_epi32(0xffff));
    d = _mm256_permute4x64_epi64(_mm256_packus_epi32(d, d), 0xd8);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(d));
  }
  template <DType T, int kOffset>
  ODMOE_CPU_INLINE static Vec GroupHalves(const uint8_t* blocks) {
    return {HalfHalves<T, kOffset>(blocks),
            HalfHalves<T, kOffset>(blocks + 8 * cpu_impl::QBlockBytes<T>())};
  }
  /// E8M0Half of byte 0 of 8 blocks: (e - 1) << 23, or 0x00200000 << e for
  /// e < 2 (the subnormals).
  template <DType T>
  ODMOE_CPU_INLINE static __m256 HalfE8M0(const uint8_t* blocks) {
    constexpr int kB = cpu_impl::QBlockBytes<T>();
    const __m256i e = _mm256_and_si256(LoadStrided32(blocks, kB), _mm256_set1_epi32(0xff));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, small));
  }
  template <DType T>
  ODMOE_CPU_INLINE static Vec E8M0Scales(const uint8_t* blocks) {
    return {HalfE8M0<T>(blocks), HalfE8M0<T>(blocks + 8 * cpu_impl::QBlockBytes<T>())};
  }
  static Vec IntsToFloat(const int32_t* p) {
    return {_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
            _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8)))};
  }
  template <DType T>
  ODMOE_CPU_INLINE static IVec GroupDot(const uint8_t* blocks, const QActGroup& x) {
    __m256i s[8];
    IVec r;
    LoadHalf<T>(blocks, s);
    r.lo = HalfDot<T>(s, x.qs, x.sum);
    LoadHalf<T>(blocks + 8 * cpu_impl::QBlockBytes<T>(), s);
    r.hi = HalfDot<T>(s, x.qs + 32, x.sum + 8);
    return r;
  }
  /// Packed codes: LoadHalf's slices, the lo half of slice m at 64 m.
  template <DType T>
  ODMOE_CPU_INLINE static void PackCodes(const uint8_t* blocks, QWeightGroup* out) {
    __m256i s[8];
    for (int h = 0; h < 2; ++h) {
      LoadHalf<T>(blocks + 8 * h * cpu_impl::QBlockBytes<T>(), s);
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->qs + 64 * m + 32 * h), s[m]);
      }
    }
  }
  template <DType T, int NX>
  ODMOE_CPU_INLINE static void PackedDots(const QWeightGroup& w, const QActGroup* const* x,
                                          IVec* sums) {
    __m256i s[8];
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 8
      for (int m = 0; m < 8; ++m) {
        s[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 64 * m + 32 * h));
      }
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) {
        const __m256i v = HalfDot<T>(s, x[t]->qs + 32 * h, x[t]->sum + 8 * h);
        (h == 0 ? sums[t].lo : sums[t].hi) = v;
      }
    }
  }
};

}  // namespace

const CpuKernels* CpuKernelsAvx2() {
  static const CpuKernels kernels = cpu_impl::MakeKernels<Avx2V>(CpuIsa::kAvx2);
  return &kernels;
}

}  // namespace odmoe

#pragma GCC pop_options

#else  // not x86

namespace odmoe {
const CpuKernels* CpuKernelsAvx2() { return nullptr; }
}  // namespace odmoe

#endif
