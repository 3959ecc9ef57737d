// The portable kernels: plain C++ that spells out the canonical order lane by
// lane (std::fma per element), the definition the SIMD levels reproduce.
// The quantized dot is spelled out block by block with plain int loops.
#include <cmath>

#include "cpu_kernels_impl.h"
#include "util/fp16.h"

namespace odmoe {
namespace {

struct ScalarV {
  struct Vec {
    float v[16];
  };
  struct IVec {
    int32_t v[16];
  };
  static constexpr int kTileNW = 2;
  static constexpr int kTileNX = 2;
  static constexpr int kQTileNX = 2;

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

  static Vec Silu(const Vec& x) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = cpu_math::Silu(x.v[l]);
    return r;
  }

  // ---- Quantized dot: the integer definitions ----
  static Vec Mul(const Vec& a, const Vec& b) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = a.v[l] * b.v[l];
    return r;
  }
  static Vec ToFloat(const IVec& s) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = static_cast<float>(s.v[l]);
    return r;
  }
  static Vec IntsToFloat(const int32_t* p) {
    Vec r;
    for (int l = 0; l < 16; ++l) r.v[l] = static_cast<float>(p[l]);
    return r;
  }
  /// The signed code qw of element e (0..31) of a stored block, as
  /// cpu_backend.h defines it for each type.
  template <DType T>
  static int WeightCode(const uint8_t* block, int e) {
    constexpr QLayout kL = QLayoutOf(T);
    if constexpr (T == DType::kQ8_0) return static_cast<int8_t>(block[kL.qs + e]);
    const uint8_t byte = block[kL.qs + e % 16];
    int code = e < 16 ? byte & 0x0f : byte >> 4;
    if constexpr (kL.qh >= 0) {
      uint32_t qh;
      std::memcpy(&qh, block + kL.qh, sizeof(qh));
      code |= static_cast<int>((qh >> e) & 1u) << 4;
    }
    switch (T) {
      case DType::kQ4_0:
        return code - 8;
      case DType::kQ5_0:
        return code - 16;
      case DType::kIQ4_NL:
        return kIq4nlValues[code];
      case DType::kMXFP4:
        return kMxfp4Values[code];
      default:  // Q4_1, Q5_1: the unsigned code
        return code;
    }
  }
  /// Byte offset of element e of block j in an interleaved group.
  static int Interleaved(int j, int e) { return 64 * (e / 4) + 4 * j + e % 4; }
  template <DType T, int kOffset>
  static Vec GroupHalves(const uint8_t* blocks) {
    Vec r;
    for (int j = 0; j < 16; ++j) {
      uint16_t d;
      std::memcpy(&d, blocks + j * cpu_impl::QBlockBytes<T>() + kOffset, sizeof(d));
      r.v[j] = F16ToF32(d);
    }
    return r;
  }
  template <DType T>
  static Vec E8M0Scales(const uint8_t* blocks) {
    Vec r;
    for (int j = 0; j < 16; ++j) r.v[j] = E8M0Half(blocks[j * cpu_impl::QBlockBytes<T>()]);
    return r;
  }
  template <DType T>
  static IVec GroupDot(const uint8_t* blocks, const QActGroup& x) {
    IVec r;
    for (int j = 0; j < 16; ++j) {
      const uint8_t* block = blocks + j * cpu_impl::QBlockBytes<T>();
      int32_t sum = 0;
      for (int e = 0; e < 32; ++e) sum += WeightCode<T>(block, e) * x.qs[Interleaved(j, e)];
      r.v[j] = sum;
    }
    return r;
  }
  /// Packed codes: the signed weight codes (all in int8 range), interleaved.
  template <DType T>
  static void PackCodes(const uint8_t* blocks, QWeightGroup* out) {
    for (int j = 0; j < 16; ++j) {
      const uint8_t* block = blocks + j * cpu_impl::QBlockBytes<T>();
      for (int e = 0; e < 32; ++e) {
        out->qs[Interleaved(j, e)] = static_cast<uint8_t>(WeightCode<T>(block, e));
      }
    }
  }
  template <DType T, int NX>
  static void PackedDots(const QWeightGroup& w, const QActGroup* const* x, IVec* sums) {
    for (int t = 0; t < NX; ++t) {
      for (int j = 0; j < 16; ++j) {
        int32_t sum = 0;
        for (int e = 0; e < 32; ++e) {
          const int p = Interleaved(j, e);
          sum += static_cast<int8_t>(w.qs[p]) * x[t]->qs[p];
        }
        sums[t].v[j] = sum;
      }
    }
  }
};

}  // namespace

const CpuKernels* CpuKernelsScalar() {
  static const CpuKernels kernels = cpu_impl::MakeKernels<ScalarV>(CpuIsa::kScalar);
  return &kernels;
}

const CpuKernels& CpuKernelsFor(CpuIsa isa) {
  const CpuKernels* k = nullptr;
  if (isa == CpuIsa::kAvx512Vnni) k = CpuKernelsAvx512Vnni();
  if (isa == CpuIsa::kAvx512) k = CpuKernelsAvx512();
  if (isa == CpuIsa::kAvx2) k = CpuKernelsAvx2();
  return k != nullptr ? *k : *CpuKernelsScalar();
}

}  // namespace odmoe
