// AVX2 K-family kernels: codes unpacked by cpu_kquant_x86_unpack.h, A_s from
// 32 elements at a time with _mm256_maddubs_epi16 (unsigned code times
// signed activation; the largest code, 63, keeps each pair below 2^15:
// 2 * 63 * 127; IQ4_XS's signed levels take |w| times x with w's sign:
// 2 * 127 * 127 < 2^15) and _mm256_madd_epi16 with the sub-block scales;
// offsets, mins through _mm256_madd_epi16 on the activation's bsums. The 16
// float lanes are two 8-lane registers (lo: lanes 0-7).
#include "cpu_kquant.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

// Everything the kernel code includes comes before the target pragma, so that
// no shared inline function is compiled for this ISA only.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kquant_unpack.h"
#include "tensor/dtype.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "cpu_kquant_impl.h"
#include "cpu_kquant_x86_unpack.h"

namespace odmoe {
namespace {

/// Shuffle controls of the sub-block scales: for 32-element step k (k % 4
/// here), the low 128-bit lane gets int16 word 2k of its 8-scale half, the
/// high lane word 2k + 1, in every word.
alignas(32) constexpr uint8_t kScaleCtrl[4][32] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
     2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
     6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,
     10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13,
     14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15}};

struct KAvx2 : KUnpackX86 {
  struct Vec {
    __m256 lo, hi;
  };
  static constexpr int kTileNX = 4;
  using IPart = __m256i;

  static Vec Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Vec Load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static Vec Mul(const Vec& a, const Vec& b) {
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
  }
  static Vec Neg(const Vec& a) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return {_mm256_xor_ps(a.lo, sign), _mm256_xor_ps(a.hi, sign)};
  }
  static Vec Fma(const Vec& a, const Vec& b, const Vec& acc) {
    return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)};
  }
  static Vec ToFloat(const int32_t* s) {
    return {_mm256_cvtepi32_ps(Load256(s)), _mm256_cvtepi32_ps(Load256(s + 8))};
  }
  static float Reduce(const Vec& a) {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 0x55)));
  }

  template <DType T, int NX>
  __attribute__((always_inline)) static inline void Dot(const KUnpacked& w,
                                                        const KActBlock* const* x, IPart* a,
                                                        IPart* b) {
    constexpr bool kSigned = T == DType::kIQ4_XS;
    __m256i acc[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_si256();
    const __m256i sc_lo =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(w.sc)));
    const __m256i sc_hi =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(w.sc + 8)));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i scv = _mm256_shuffle_epi8(k < 4 ? sc_lo : sc_hi, Load256(kScaleCtrl[k % 4]));
      const __m256i wq = Load256(w.q + 32 * k);
      const __m256i uw = kSigned ? _mm256_abs_epi8(wq) : wq;
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) {
        __m256i xv = Load256(x[t]->qs + 32 * k);
        if constexpr (kSigned) xv = _mm256_sign_epi8(xv, wq);
        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(uw, xv), scv));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const __m256i bs = Load256(x[t]->bsums);
      if constexpr (T == DType::kQ3_K || T == DType::kQ6_K) {
        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(bs, Load256(w.corr)));
      }
      a[t] = acc[t];
      if constexpr (kquant_impl::HasMins<T>()) b[t] = _mm256_madd_epi16(bs, Load256(w.mn));
    }
  }
};

}  // namespace

const CpuKQuantKernels* CpuKQuantKernelsAvx2() {
  static const CpuKQuantKernels kernels = kquant_impl::MakeKQuantKernels<KAvx2>(CpuIsa::kAvx2);
  return &kernels;
}

}  // namespace odmoe

#pragma GCC pop_options

#else  // not x86

namespace odmoe {
const CpuKQuantKernels* CpuKQuantKernelsAvx2() { return nullptr; }
}  // namespace odmoe

#endif
