// The portable K-family kernels: the unpacked layout's definition
// (CpuKQuantUnpackReference) and the integer sums A_s, B_s spelled out with
// plain int loops; the float step lane by lane with std::fma.
#include <cmath>

#include "cpu_kquant.h"
#include "cpu_kquant_impl.h"
#include "cpu_kquant_unpack.h"

namespace odmoe {

bool IsKQuantWeightType(DType type) {
  switch (type) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

int KBlockBytes(DType type) {
  int bytes = 0;
  kquant_impl::KDispatch(
      type, [&](auto tag) { bytes = kquant_impl::BlockBytes<decltype(tag)::value>(); });
  return bytes;
}

void CpuKQuantUnpackReference(DType type, const uint8_t* blocks, int64_t count, KUnpacked* out) {
  const int bytes = KBlockBytes(type);
  for (int64_t s = 0; s < count; ++s, blocks += bytes, ++out) {
    switch (type) {
      case DType::kQ2_K: {
        const auto& b = *reinterpret_cast<const BlockQ2K*>(blocks);
        KUnpackScalesQ2K(b, out);
        KUnpackCodesQ2K(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = F16ToF32(b.dmin);
        break;
      }
      case DType::kQ3_K: {
        const auto& b = *reinterpret_cast<const BlockQ3K*>(blocks);
        KUnpackScalesQ3K(b, out);
        KUnpackCodesQ3K(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = 0.0f;
        break;
      }
      case DType::kQ4_K: {
        const auto& b = *reinterpret_cast<const BlockQ4K*>(blocks);
        KUnpackScalesQ4K(b, out);
        KUnpackCodesQ4K(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = F16ToF32(b.dmin);
        break;
      }
      case DType::kQ5_K: {
        const auto& b = *reinterpret_cast<const BlockQ5K*>(blocks);
        KUnpackScalesQ5K(b, out);
        KUnpackCodesQ5K(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = F16ToF32(b.dmin);
        break;
      }
      case DType::kQ6_K: {
        const auto& b = *reinterpret_cast<const BlockQ6K*>(blocks);
        KUnpackScalesQ6K(b, out);
        KUnpackCodesQ6K(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = 0.0f;
        break;
      }
      default: {
        const auto& b = *reinterpret_cast<const BlockIq4Xs*>(blocks);
        KUnpackScalesIq4Xs(b, out);
        KUnpackCodesIq4Xs(b, out);
        out->d = F16ToF32(b.d);
        out->dmin = 0.0f;
        break;
      }
    }
  }
}

namespace {

struct ScalarK {
  struct Vec {
    float v[16];
  };
  static constexpr int kTileNX = 2;
  using IPart = int32_t;
  static void Sum16(const int32_t* parts, int32_t* out) {
    std::memcpy(out, parts, 16 * sizeof(int32_t));
  }

  static Vec Zero() { return Vec{}; }
  static Vec Load16(const float* p) {
    Vec r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static Vec Mul(const Vec& a, const Vec& b) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = a.v[l] * b.v[l];
    return r;
  }
  static Vec Neg(const Vec& a) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = -a.v[l];
    return r;
  }
  static Vec Fma(const Vec& a, const Vec& b, const Vec& acc) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = std::fma(a.v[l], b.v[l], acc.v[l]);
    return r;
  }
  static Vec ToFloat(const int32_t* s) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = static_cast<float>(s[l]);
    return r;
  }
  static float Reduce(const Vec& a) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; ++i) s8[i] = a.v[i] + a.v[i + 8];
    for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
    const float s2_0 = s4[0] + s4[2];
    const float s2_1 = s4[1] + s4[3];
    return s2_0 + s2_1;
  }

  template <DType T>
  static void Unpack(const uint8_t* block, KUnpacked* out) {
    CpuKQuantUnpackReference(T, block, 1, out);
  }

  /// A_s and B_s by their definition (cpu_kquant.h).
  template <DType T, int NX>
  static void Dot(const KUnpacked& w, const KActBlock* const* x, int32_t* a, int32_t* b) {
    for (int t = 0; t < NX; ++t) {
      int32_t sum_a = 0, sum_b = 0;
      for (int j = 0; j < 16; ++j) {
        int32_t isum = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) {
          const int q = T == DType::kIQ4_XS ? static_cast<int8_t>(w.q[i]) : w.q[i];
          isum += q * x[t]->qs[i];
        }
        sum_a += w.sc[j] * isum + w.corr[j] * x[t]->bsums[j];
        sum_b += w.mn[j] * x[t]->bsums[j];
      }
      a[t] = sum_a;
      b[t] = sum_b;
    }
  }
};

}  // namespace

const CpuKQuantKernels* CpuKQuantKernelsScalar() {
  static const CpuKQuantKernels kernels = kquant_impl::MakeKQuantKernels<ScalarK>(CpuIsa::kScalar);
  return &kernels;
}

const CpuKQuantKernels& CpuKQuantKernelsFor(CpuIsa isa) {
  const CpuKQuantKernels* k = nullptr;
  if (isa == CpuIsa::kAvx512Vnni) k = CpuKQuantKernelsAvx512Vnni();
  if (isa == CpuIsa::kAvx512) k = CpuKQuantKernelsAvx512();
  if (isa == CpuIsa::kAvx2) k = CpuKQuantKernelsAvx2();
  return k != nullptr ? *k : *CpuKQuantKernelsScalar();
}

}  // namespace odmoe
