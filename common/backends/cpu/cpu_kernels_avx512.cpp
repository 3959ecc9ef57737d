// AVX-512 kernels: the vector type of cpu_kernels_avx512_impl.h
// compiled for AVX-512F/BW/VL (no VNNI).
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
#include "util/fp16.h"

#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_*() helpers as uninitialized when
// they are inlined here (GCC bug 105593); the warning is a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")

#include "cpu_kernels_avx512_impl.h"
#include "cpu_q8_0_acts_avx512_impl.h"

namespace odmoe {

const CpuKernels* CpuKernelsAvx512() {
  static const CpuKernels kernels = [] {
    CpuKernels k = cpu_impl::MakeKernels<Avx512V<false>>(CpuIsa::kAvx512);
    k.quantize_q8_0_acts = &QuantizeQ8_0ActsAvx512;
    return k;
  }();
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
