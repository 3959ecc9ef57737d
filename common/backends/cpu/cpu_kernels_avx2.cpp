// AVX2 + FMA + F16C kernels: the 16 canonical lanes live in two 8-lane
// registers (lo: lanes 0-7, hi: lanes 8-15).
#include "cpu_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

// Everything the kernel code includes comes before the target pragma, so that
// no shared inline function is compiled for this ISA only.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "util/fp16.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#include "cpu_kernels_impl.h"

namespace odmoe {
namespace {

struct Avx2V {
  struct Vec {
    __m256 lo, hi;
  };
  static constexpr int kTileNW = 2;
  static constexpr int kTileNX = 2;

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
    return F16ToF32(d);
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
