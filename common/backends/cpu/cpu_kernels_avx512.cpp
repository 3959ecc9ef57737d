// AVX-512 kernels: the 16 canonical lanes are one zmm register.
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
// GCC 12 reports its own _mm512_undefined_*() helpers as uninitialized when
// they are inlined here (GCC bug 105593); the warning is a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")

#include "cpu_kernels_impl.h"

namespace odmoe {
namespace {

struct Avx512V {
  using Vec = __m512;
  static constexpr int kTileNW = 4;
  static constexpr int kTileNX = 4;

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
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
  static __m512 F16x16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
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
      const __m512 d = _mm512_set1_ps(Scale(block));
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
      a = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
      b = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
    } else {
      const uint8_t* block = row + kQ4_0BlockBytes * blk;
      const __m512 d = _mm512_set1_ps(Scale(block));
      const __m512i q = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
      const __m512i eight = _mm512_set1_epi32(8);
      const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0f)), eight);
      const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
      a = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d);
      b = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d);
    }
  }
};

}  // namespace

const CpuKernels* CpuKernelsAvx512() {
  static const CpuKernels kernels = cpu_impl::MakeKernels<Avx512V>(CpuIsa::kAvx512);
  return &kernels;
}

}  // namespace odmoe

#pragma GCC diagnostic pop
#pragma GCC pop_options

#else  // not x86

namespace odmoe {
const CpuKernels* CpuKernelsAvx512() { return nullptr; }
}  // namespace odmoe

#endif
