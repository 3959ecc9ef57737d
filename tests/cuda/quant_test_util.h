// Helpers of the CUDA suite's quantized-type tests (host side): random stored
// blocks of every quantized weight type with finite scales, bitwise float
// comparison and the half-warp lane simulation.
//
//   std::vector<uint8_t> w = RandomBlocks(DType::kQ4_K, rows * blocks_per_row, seed);
//   float y = HalfWarp([&](int l) { return LaneKDot<DType::kQ4_K>(w.data(), xq, n, l); });
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "cuda_numerics.h"
#include "tensor/dtype.h"
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

}  // namespace odmoe::cuda_test
