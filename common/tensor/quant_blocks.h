// Block layouts of the quantized GGML types, byte for byte as GGUF files
// store them (little-endian; `f16` fields are IEEE half bit patterns).
//
// Types with 32-element blocks ("block32"):
//   Q8_0   { f16 d; int8 qs[32]; }                      w = d * qs[i]
//   Q4_0   { f16 d; u8 qs[16]; }                        w = d * (q - 8)
//   Q4_1   { f16 d, m; u8 qs[16]; }                     w = d * q + m
//   Q5_0   { f16 d; u8 qh[4]; u8 qs[16]; }              w = d * (q - 16)
//   Q5_1   { f16 d, m; u8 qh[4]; u8 qs[16]; }           w = d * q + m
//   IQ4_NL { f16 d; u8 qs[16]; }                        w = d * kIq4nlValues[q]
//   MXFP4  { u8 e; u8 qs[16]; }   w = E8M0Half(e) * kMxfp4Values[q]
// where the 4-bit code of element i < 16 is the low nibble of qs[i] and of
// element i + 16 the high nibble; for Q5_x, bit i of the 32-bit qh (element
// i) is the code's fifth bit.
//
// K-quants and IQ4_XS have 256-element super-blocks ("K family"): see the
// structs below for the sub-block scales; tensor/quant.h says how each one
// dequantizes. Q8_K is the activation type their dot products use.
//
//   static_assert(sizeof(BlockQ4K) == 144);
//   const auto* b = reinterpret_cast<const BlockQ4K*>(row);  // 256 weights
#pragma once

#include <cstdint>
#include <cstring>

namespace odmoe {

inline constexpr int kQ8_0BlockElems = 32;
inline constexpr int kQ8_0BlockBytes = 34;
inline constexpr int kQ4_0BlockElems = 32;
inline constexpr int kQ4_0BlockBytes = 18;
/// Elements of a block of every block32 type.
inline constexpr int kBlock32Elems = 32;
/// Elements of a K-family super-block.
inline constexpr int kSuperBlockElems = 256;
/// Bytes of the packed 6-bit scales and mins of Q3_K, Q4_K and Q5_K.
inline constexpr int kKScaleBytes = 12;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8_0BlockElems];
};
static_assert(sizeof(BlockQ8_0) == kQ8_0BlockBytes);

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQ4_0BlockElems / 2];
};
static_assert(sizeof(BlockQ4_0) == kQ4_0BlockBytes);

struct BlockQ4_1 {
  uint16_t d;  // f16 scale
  uint16_t m;  // f16 offset
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // fifth bits, element i at bit i of the LE 32-bit value
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];  // indices into kIq4nlValues
};
static_assert(sizeof(BlockIq4Nl) == 18);

struct BlockMxfp4 {
  uint8_t e;       // E8M0 shared exponent
  uint8_t qs[16];  // E2M1 codes, indices into kMxfp4Values
};
static_assert(sizeof(BlockMxfp4) == 17);

/// 16 sub-blocks of 16; scales[j]: low nibble scale, high nibble min.
struct BlockQ2K {
  uint8_t scales[16];
  uint8_t qs[64];  // 2-bit codes
  uint16_t d;      // f16 super-block scale of the scales
  uint16_t dmin;   // f16 super-block scale of the mins
};
static_assert(sizeof(BlockQ2K) == 84);

/// 16 sub-blocks of 16; 6-bit scales (biased by 32) packed in 12 bytes.
struct BlockQ3K {
  uint8_t hmask[32];  // high bits of the 3-bit codes
  uint8_t qs[64];     // low 2 bits
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3K) == 110);

/// 8 sub-blocks of 32; 6-bit scales and mins packed in 12 bytes.
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[128];  // 4-bit codes
};
static_assert(sizeof(BlockQ4K) == 144);

/// Q4_K plus a fifth bit per code.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5K) == 176);

/// 16 sub-blocks of 16 with int8 scales; 6-bit codes biased by 32.
struct BlockQ6K {
  uint8_t ql[128];  // low 4 bits
  uint8_t qh[64];   // high 2 bits
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 210);

/// The K family's activation type: 256 int8 codes with an f32 scale and the
/// sums of each 16 consecutive codes.
struct BlockQ8K {
  float d;
  int8_t qs[kSuperBlockElems];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8K) == 292);

/// 8 sub-blocks of 32; 6-bit scales (biased by 32): low 4 bits in scales_l
/// (two per byte), high 2 bits in scales_h (two bits per sub-block).
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];  // indices into kIq4nlValues
};
static_assert(sizeof(BlockIq4Xs) == 136);

/// The 16 non-linear levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
/// E2M1 values times two (the block scale is halved to match).
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

/// The MXFP4 block scale: 2^(e - 128) exactly (half the E8M0 value 2^(e -
/// 127), matching the doubled kMxfp4Values). e = 0 and 1 give the subnormals
/// 2^-128 and 2^-127; e = 255 gives 2^127 (no NaN encoding here).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace odmoe
