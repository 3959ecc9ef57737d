// Helpers of the CUDA suite's numerics tests (host side): bitwise float
// comparison, the half-warp lane simulation, the kernels' MatMul for any
// weight type simulated lane by lane, random stored blocks of every quantized
// weight type with finite scales, and the MatMul cases shared by the type
// families.
//
//   std::vector<uint8_t> w = RandomBlocks(DType::kQ4_K, rows * blocks_per_row, seed);
//   float y = HalfWarp([&](int l) { return LaneKDot<DType::kQ4_K>(w.data(), xq, n, l); });
//   CHECK(SameBits(LaneMatMul(DType::kQ4_K, w, out, k, x, n), want));
//   VisitTypeOf<cuda_numerics::IsKFamily>(type, [&](auto tag) { ... decltype(tag)::value ... });
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "backend/reference_ops.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_isa.h"
#include "cpu_ops.h"
#include "cuda_numerics.h"
#include "cuda_numerics_dequant.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "util/fp16.h"

namespace odmoe::cuda_test {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Bits(a[i]) != Bits(b[i])) {
      UNSCOPED_INFO("first difference at " << i << ": " << a[i] << " vs " << b[i] << " (of "
                                           << a.size() << ")");
      return false;
    }
  }
  return true;
}

/// The sixteen lanes of a half-warp, reduced by the tree.
template <class LaneFn>
float HalfWarp(LaneFn lane) {
  float l[16];
  for (int i = 0; i < 16; ++i) l[i] = lane(i);
  return cuda_numerics::TreeReduce16(l);
}

/// Calls f(tag) (a cuda_numerics::TypeTag) for `type` when kFamily(type)
/// holds (cuda_numerics::IsBlock32, IsKFamily, CudaKernelType); fails the
/// test case for any other type.
template <auto kFamily, class F>
void VisitTypeOf(DType type, F&& f) {
  bool visited = false;
  cuda_numerics::VisitWeightType(type, [&](auto tag) {
    if constexpr (kFamily(decltype(tag)::value)) {
      visited = true;
      f(tag);
    }
  });
  REQUIRE(visited);
}

/// Stored rows of `type`: QuantizeRow of each of the `rows` rows of f.
inline std::vector<uint8_t> QuantizedRows(DType type, const std::vector<float>& f, int64_t rows,
                                          int64_t cols) {
  const size_t rb = RowBytes(type, cols);
  std::vector<uint8_t> bytes(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(type, f.data() + r * cols, bytes.data() + r * rb, cols);
  }
  return bytes;
}

/// Elements 0..n-1 of a stored row as the kernels dequantize them.
inline std::vector<float> DeviceDequant(DType type, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  VisitTypeOf<cuda_numerics::CudaKernelType>(type, [&](auto tag) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] = cuda_numerics::DequantElement<decltype(tag)::value>(row.data(), i);
    }
  });
  return out;
}

/// y[n, out] = x[n, k] w^T as the kernels form it, element by element: the
/// activations quantized as the kernel for `type` does (Q8_0 blocks for the
/// block32 types, Q8_K super-blocks for the K family, none for float
/// weights), the 16 lanes of the type's lane function, then the tree.
inline std::vector<float> LaneMatMul(DType type, const std::vector<uint8_t>& w, int64_t out,
                                     int64_t k, const std::vector<float>& x, int64_t n) {
  namespace num = cuda_numerics;
  std::vector<float> y(static_cast<size_t>(n * out));
  const size_t rb = RowBytes(type, k);
  const auto each_output = [&](auto lane_fn) {  // lane_fn(w_row, t, lane)
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t o = 0; o < out; ++o) {
        y[t * out + o] = HalfWarp([&](int l) { return lane_fn(w.data() + o * rb, t, l); });
      }
    }
  };
  VisitTypeOf<num::CudaKernelType>(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    if constexpr (num::IsBlock32(T)) {
      const int64_t nb = k / 32;
      std::vector<num::QActBlock> codes(static_cast<size_t>(n * nb));
      std::vector<float> scales(codes.size());
      for (size_t i = 0; i < codes.size(); ++i) {
        scales[i] = num::QuantizeBlockQ8_0(x.data() + 32 * i, &codes[i], nullptr);
      }
      each_output([&](const uint8_t* wr, int64_t t, int l) {
        return num::LaneQDot<T>(wr, codes.data() + t * nb, scales.data() + t * nb, nb, l);
      });
    } else if constexpr (num::IsKFamily(T)) {
      const int64_t ns = k / 256;
      std::vector<num::QActSuperBlock> xq(static_cast<size_t>(n * ns));
      for (size_t i = 0; i < xq.size(); ++i) {
        num::QuantizeBlockQ8_K(x.data() + 256 * i, &xq[i], nullptr);
      }
      each_output([&](const uint8_t* wr, int64_t t, int l) {
        return num::LaneKDot<T>(wr, xq.data() + t * ns, ns, l);
      });
    } else {
      each_output([&](const uint8_t* wr, int64_t t, int l) {
        return num::LaneDot<T>(wr, x.data() + t * k, k, l);
      });
    }
  });
  return y;
}

/// Byte offsets of the f16 scale fields (d, m, dmin) of a block of `type`.
inline std::vector<size_t> F16FieldOffsets(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return {offsetof(BlockQ8_0, d)};
    case DType::kQ4_0:
      return {offsetof(BlockQ4_0, d)};
    case DType::kQ4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::kQ5_0:
      return {offsetof(BlockQ5_0, d)};
    case DType::kQ5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::kIQ4_NL:
      return {offsetof(BlockIq4Nl, d)};
    case DType::kQ2_K:
      return {offsetof(BlockQ2K, d), offsetof(BlockQ2K, dmin)};
    case DType::kQ3_K:
      return {offsetof(BlockQ3K, d)};
    case DType::kQ4_K:
      return {offsetof(BlockQ4K, d), offsetof(BlockQ4K, dmin)};
    case DType::kQ5_K:
      return {offsetof(BlockQ5K, d), offsetof(BlockQ5K, dmin)};
    case DType::kQ6_K:
      return {offsetof(BlockQ6K, d)};
    case DType::kIQ4_XS:
      return {offsetof(BlockIq4Xs, d)};
    default:
      return {};
  }
}

/// How the code bytes of RandomBlocks are drawn.
enum class BlockFill { kRandom, kZeros, kOnes, kHigh, kAlternate };

/// `n_blocks` stored blocks of a quantized `type`: code and sub-scale bytes
/// per `fill`, the f16 scales finite (random sign, 2^-10 .. 2^-2, sometimes 0
/// or subnormal), MXFP4's exponent in 2^-10 .. 2^7 (no inf in a product).
inline std::vector<uint8_t> RandomBlocks(DType type, int64_t n_blocks, uint32_t seed,
                                         BlockFill fill = BlockFill::kRandom) {
  const int bytes = Traits(type).block_bytes;
  std::vector<uint8_t> out(static_cast<size_t>(n_blocks * bytes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(-10.0f, -2.0f);
  for (size_t i = 0; i < out.size(); ++i) {
    switch (fill) {
      case BlockFill::kRandom:
        out[i] = static_cast<uint8_t>(byte(rng));
        break;
      case BlockFill::kZeros:
        out[i] = 0x00;
        break;
      case BlockFill::kOnes:
        out[i] = 0xff;
        break;
      case BlockFill::kHigh:
        out[i] = 0x80;
        break;
      case BlockFill::kAlternate:
        out[i] = (i % 2) != 0 ? 0x0f : 0xf0;
        break;
    }
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = out.data() + b * bytes;
    if (type == DType::kMXFP4) {
      blk[0] = static_cast<uint8_t>(118 + byte(rng) % 18);
      continue;
    }
    for (size_t off : F16FieldOffsets(type)) {
      const int r = byte(rng);
      uint16_t h;
      if (r < 8) {
        h = 0;
      } else if (r < 16) {
        h = static_cast<uint16_t>(1 + byte(rng) * 4);  // subnormal
      } else {
        h = F32ToF16(std::exp2(mag(rng)));
      }
      if (byte(rng) % 2 != 0) h = static_cast<uint16_t>(h | 0x8000u);
      std::memcpy(blk + off, &h, sizeof(h));
    }
  }
  return out;
}

/// A MatMul shape: y[n, out] = x[n, k] w^T.
struct MatMulShape {
  int64_t k, out, n;
};

/// A family's plain reference MatMul (its canonical order written out).
using RefMatMulFn = std::vector<float> (*)(DType type, const std::vector<uint8_t>& w, int64_t out,
                                           int64_t k, const std::vector<float>& x, int64_t n);

/// The MatMul cases of a quantized `type`, per shape and weight source (0 the
/// quantizer's output, 1 random block bytes, 2 / 3 every code byte 0xff /
/// 0x80 against activations `extreme_x` / alternating +-1, the integer
/// extremes): LaneMatMul gives `ref`'s bits and CpuBackend's on every ISA
/// level of this machine. `seed` advances by two per case.
inline void CheckLaneMatMulCases(DType type, std::initializer_list<MatMulShape> shapes,
                                 float extreme_x, RefMatMulFn ref, uint32_t* seed) {
  INFO(Traits(type).name);
  REQUIRE(CpuSupportsWeightType(type));
  const int64_t block_elems = Traits(type).block_elems;
  for (const MatMulShape s : shapes) {
    for (int source = 0; source < 4; ++source) {
      INFO(Traits(type).name << " k=" << s.k << " out=" << s.out << " n=" << s.n << " source "
                             << source);
      std::vector<float> x = ref::RandomFloats(s.k * s.n, ++*seed, -3.0f, 3.0f);
      std::vector<uint8_t> w;
      if (source == 0) {
        w = QuantizedRows(type, ref::RandomFloats(s.k * s.out, ++*seed), s.out, s.k);
      } else if (source == 1) {
        w = RandomBlocks(type, s.out * s.k / block_elems, ++*seed);
      } else {
        w = RandomBlocks(type, s.out * s.k / block_elems, ++*seed,
                         source == 2 ? BlockFill::kOnes : BlockFill::kHigh);
        for (size_t i = 0; i < x.size(); ++i)
          x[i] = source == 2 ? extreme_x : (i % 2 ? -1.0f : 1.0f);
      }
      const std::vector<float> got = LaneMatMul(type, w, s.out, s.k, x, s.n);
      CHECK(SameBits(got, ref(type, w, s.out, s.k, x, s.n)));
      for (CpuIsa isa : SupportedCpuIsas()) {
        INFO("cpu isa " << CpuIsaName(isa));
        CpuBackend cpu(2, isa);
        std::vector<float> want(got.size());
        cpu.MatMul(WeightRef{type, w.data(), s.out, s.k}, ConstMat(x.data(), s.n, s.k),
                   Mat{want.data(), s.n, s.out});
        CHECK(SameBits(got, want));
      }
    }
  }
}

}  // namespace odmoe::cuda_test
