// Sub-block scales (and mins) of the K family, unpacked to plain integers.
//
// Shared by the reference conversions (tensor/quant_kfamily*.cpp) and the
// CPU MatMul kernels, so both read the packed fields one way. Every function
// is exact integer work; "scale" below is the sub-block's integer multiplier
// of the super-block's f16 `d`, "min" the multiplier of `dmin`
// (tensor/quant_blocks.h has the block layouts):
//
//   Q2_K   16 sub-blocks of 16: scales[j] low nibble scale, high nibble min
//          (both 0..15).
//   Q3_K   16 sub-blocks of 16: 6-bit scales stored biased by 32 in 12 bytes;
//          unpacked here to -32..31 (bias removed). Scale j's low 4 bits are
//          the low (j < 8) or high (j >= 8) nibble of byte j % 8, its high
//          2 bits are bits 2*(j/4)..2*(j/4)+1 of byte 8 + j % 4.
//   Q4_K,  8 sub-blocks of 32: 6-bit scales and mins (0..63) in 12 bytes.
//   Q5_K   For j < 4: scale = byte j & 63, min = byte j+4 & 63. For j >= 4:
//          scale = (byte j+4 & 15) | (byte j-4 >> 6) << 4,
//          min = (byte j+4 >> 4) | (byte j >> 6) << 4.
//   Q6_K   16 sub-blocks of 16: int8 scales stored as they are (no unpacking).
//   IQ4_XS 8 sub-blocks of 32: 6-bit scales biased by 32, unpacked here to
//          -32..31: low 4 bits the low (even j) or high (odd j) nibble of
//          scales_l[j / 2], high 2 bits bits 2j..2j+1 of scales_h.
//
// Each type's dequantized weight is then (tensor/quant.h has the float order)
//   Q2_K: (d * scale) * q - dmin * min       Q4_K / Q5_K: the same
//   Q3_K, Q6_K, IQ4_XS: (d * scale) * q
//
// Usage (a kernel's integer sums over a Q4_K super-block):
//
//   const auto& b = reinterpret_cast<const BlockQ4K*>(row)[s];
//   uint8_t scale[8], min[8];
//   UnpackQ4KScalesMins(b.scales, scale, min);
//   for (int j = 0; j < 8; ++j) {
//     a += scale[j] * isum[j];        // isum: sum of q * qx over sub-block j
//     bsum += min[j] * (x8.bsums[2 * j] + x8.bsums[2 * j + 1]);
//   }
//
// The Pack* functions are the exact inverses (the quantizers use them):
// Unpack(Pack(v)) == v for every value in range.
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace odmoe {

/// Q2_K: the 16 nibble scales and mins, each 0..15.
inline void UnpackQ2KScalesMins(const uint8_t packed[16], uint8_t scale[16], uint8_t min[16]) {
  for (int j = 0; j < 16; ++j) {
    scale[j] = packed[j] & 0x0f;
    min[j] = packed[j] >> 4;
  }
}

/// Q3_K: the 16 scales with the bias of 32 removed (-32..31).
inline void UnpackQ3KScales(const uint8_t packed[kKScaleBytes], int8_t scale[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 0x03;
    scale[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

/// Q3_K: packs 16 scales in -32..31 (stored biased by 32).
inline void PackQ3KScales(const int8_t scale[16], uint8_t packed[kKScaleBytes]) {
  for (int i = 0; i < kKScaleBytes; ++i) packed[i] = 0;
  for (int j = 0; j < 16; ++j) {
    const int biased = scale[j] + 32;
    packed[j % 8] |= static_cast<uint8_t>((biased & 0x0f) << (j < 8 ? 0 : 4));
    packed[8 + j % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (j / 4)));
  }
}

/// Q4_K and Q5_K: the 8 six-bit scales and mins (0..63).
inline void UnpackQ4KScalesMins(const uint8_t packed[kKScaleBytes], uint8_t scale[8],
                                uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = packed[j] & 0x3f;
    min[j] = packed[j + 4] & 0x3f;
  }
  for (int j = 4; j < 8; ++j) {
    scale[j] = static_cast<uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4));
    min[j] = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

/// Q4_K and Q5_K: packs 8 scales and 8 mins, each 0..63.
inline void PackQ4KScalesMins(const uint8_t scale[8], const uint8_t min[8],
                              uint8_t packed[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((scale[j] & 0x3f) | ((scale[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((min[j] & 0x3f) | ((min[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0x0f) | ((min[j + 4] & 0x0f) << 4));
  }
}

/// IQ4_XS: the 8 scales with the bias of 32 removed (-32..31).
inline void UnpackIq4XsScales(uint16_t scales_h, const uint8_t scales_l[4], int8_t scale[8]) {
  for (int j = 0; j < 8; ++j) {
    const int low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
    const int high = (scales_h >> (2 * j)) & 0x03;
    scale[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

/// IQ4_XS: packs 8 scales in -32..31 (stored biased by 32).
inline void PackIq4XsScales(const int8_t scale[8], uint16_t* scales_h, uint8_t scales_l[4]) {
  uint16_t h = 0;
  for (int i = 0; i < 4; ++i) scales_l[i] = 0;
  for (int j = 0; j < 8; ++j) {
    const int biased = scale[j] + 32;
    scales_l[j / 2] |= static_cast<uint8_t>((biased & 0x0f) << (4 * (j % 2)));
    h = static_cast<uint16_t>(h | ((biased >> 4) << (2 * j)));
  }
  *scales_h = h;
}

}  // namespace odmoe
