// The portable kernels: plain C++ that spells out the canonical order lane by
// lane (std::fma per element), the definition the SIMD levels reproduce.
#include <cmath>

#include "cpu_kernels_impl.h"

namespace odmoe {
namespace {

struct ScalarV {
  struct Vec {
    float v[16];
  };
  static constexpr int kTileNW = 2;
  static constexpr int kTileNX = 2;

  static Vec Zero() { return Vec{}; }
  static Vec Broadcast(float a) {
    Vec r;
    for (float& f : r.v) f = a;
    return r;
  }
  static Vec Load16(const float* p) {
    Vec r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void Store16(const Vec& v, float* p) { std::memcpy(p, v.v, sizeof(v.v)); }
  static Vec Fma(const Vec& w, const Vec& x, const Vec& acc) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = std::fma(w.v[l], x.v[l], acc.v[l]);
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
  static void LoadW32(const uint8_t* row, int64_t blk, Vec& a, Vec& b) {
    float buf[32];
    DequantizeRow(T, row + RowBytes(T, 32 * blk), buf, 32);
    std::memcpy(a.v, buf, sizeof(a.v));
    std::memcpy(b.v, buf + 16, sizeof(b.v));
  }
};

}  // namespace

const CpuKernels* CpuKernelsScalar() {
  static const CpuKernels kernels = cpu_impl::MakeKernels<ScalarV>(CpuIsa::kScalar);
  return &kernels;
}

const CpuKernels& CpuKernelsFor(CpuIsa isa) {
  const CpuKernels* k = nullptr;
  if (isa == CpuIsa::kAvx512) k = CpuKernelsAvx512();
  if (isa == CpuIsa::kAvx2) k = CpuKernelsAvx2();
  return k != nullptr ? *k : *CpuKernelsScalar();
}

}  // namespace odmoe
