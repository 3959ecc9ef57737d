// The CUDA kernels' arithmetic for weights in 32-element blocks (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4), `__host__ __device__` like the rest of
// cuda_numerics.h, so the host tests check it bit for bit against the CPU
// backend (cpu_backend.h, "MatMul with Q8_0 / Q4_0 weights" and the block32
// additions).
//
// Every type is one row of a table (Block32FormatOf): block bytes, where the
// scale, min, fifth bits and codes sit, and how a stored code maps to the
// signed integer qw of the canonical dot. One decoder and one lane function
// serve all types:
//
//   using namespace odmoe::cuda_numerics;
//   QActBlock xq[n_blocks];  float dx[n_blocks];
//   for (b...) dx[b] = QuantizeBlockQ8_0(x + 32 * b, &xq[b], nullptr);
//   float lanes[16];
//   for (int l = 0; l < 16; ++l) lanes[l] = LaneQDot<DType::kQ5_1>(w_row, xq, dx, n_blocks, l);
//   float y = TreeReduce16(lanes);       // == CpuBackend's MatMul element
//
// Per block b (lane b % 16): lane = fma(dw * dx, (float)isum, lane) with
// isum = sum_i qw_i * qx_i exact in int32; types with a min (Q4_1, Q5_1)
// then lane = fma(mw * dx, (float)sx, lane), sx the sum of the 32 activation
// codes. Stored blocks are read in 16-bit words (rows must start at even
// addresses), except MXFP4 whose 17-byte blocks are read byte by byte.
#pragma once

#include "cuda_numerics.h"

namespace odmoe::cuda_numerics {

// ---- Q8_0 activations --------------------------------------------------------

/// Activation codes of one 32-element block as 8 words of 4 int8 codes
/// (element e in byte e % 4 of word e / 4), 4-byte aligned for dp4a.
struct QActBlock {
  int32_t qs[8];
};

/// fmax(-127, fmin(roundf(v), 127)) with NaN giving 127, as tensor/quant.cpp.
ODMOE_HD int ClampedRound(float v) {
  if (!(v < 127.5f)) return 127;
  if (!(v > -127.5f)) return -127;
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  return frac >= 0.5f ? t + 1 : (frac <= -0.5f ? t - 1 : t);
}

/// One block of QuantizeRow(kQ8_0, ...): 32 floats to codes and the f16 scale
/// bits; returns the scale as the dot uses it (F16ToF32 of those bits).
ODMOE_HD float QuantizeBlockQ8_0(const float* x, QActBlock* out, uint16_t* scale_bits) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = MaxSkipNan(amax, Abs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int w = 0; w < 8; ++w) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
      const int q = ClampedRound(x[4 * w + b] * id);
      word |= (static_cast<uint32_t>(q) & 0xffu) << (8 * b);
    }
    out->qs[w] = static_cast<int32_t>(word);
  }
  const uint16_t bits = F32ToF16(d);
  if (scale_bits != nullptr) *scale_bits = bits;
  return F16ToF32(bits);
}

/// The sum of the block's 32 codes (sx of the min step).
ODMOE_HD int32_t ActCodeSum(const QActBlock& x) {
  int32_t s = 0;
  for (int w = 0; w < 8; ++w) s = Dot4(x.qs[w], 0x01010101, s);
  return s;
}

// ---- The table of block formats ---------------------------------------------

/// How a stored code becomes the signed integer qw of the dot.
enum class CodeMap {
  kInt8,        // Q8_0: the byte itself
  kMinus8,      // Q4_0: nibble - 8
  kUnsigned,    // Q4_1 / Q5_1: the 4- or 5-bit code itself
  kMinus16,     // Q5_0: 5-bit code - 16
  kIq4nlTable,  // IQ4_NL: kIq4nlValues[nibble]
  kMxfp4Table,  // MXFP4: kMxfp4Values[nibble]
};

/// Where the fields of one block sit (byte offsets; -1: absent).
struct Block32Format {
  int bytes;
  int scale_offset;  // f16 d, or for MXFP4 the E8M0 exponent byte
  bool e8m0_scale;   // scale is E8M0Half(byte) instead of an f16
  int min_offset;    // f16 m (w = d * q + m)
  int qh_offset;     // 32 fifth bits, element i at bit i
  int qs_offset;     // codes: 32 bytes (Q8_0) or 16 bytes of two nibbles
  CodeMap map;
};

template <DType T>
ODMOE_HD constexpr Block32Format Block32FormatOf() {
  if constexpr (T == DType::kQ8_0) return {34, 0, false, -1, -1, 2, CodeMap::kInt8};
  if constexpr (T == DType::kQ4_0) return {18, 0, false, -1, -1, 2, CodeMap::kMinus8};
  if constexpr (T == DType::kQ4_1) return {20, 0, false, 2, -1, 4, CodeMap::kUnsigned};
  if constexpr (T == DType::kQ5_0) return {22, 0, false, -1, 2, 6, CodeMap::kMinus16};
  if constexpr (T == DType::kQ5_1) return {24, 0, false, 2, 4, 8, CodeMap::kUnsigned};
  if constexpr (T == DType::kIQ4_NL) return {18, 0, false, -1, -1, 2, CodeMap::kIq4nlTable};
  if constexpr (T == DType::kMXFP4) return {17, 0, true, -1, -1, 1, CodeMap::kMxfp4Table};
  return {0, 0, false, -1, -1, 0, CodeMap::kInt8};
}

/// True for the block32 types the table has a row for.
ODMOE_HD constexpr bool IsBlock32(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 ||
         t == DType::kQ5_1 || t == DType::kIQ4_NL || t == DType::kMXFP4;
}

inline constexpr Lut16 kIq4nlLut = MakeLut16(kIq4nlValues);
inline constexpr Lut16 kMxfp4Lut = MakeLut16(kMxfp4Values);

/// E8M0Half(e) = 2^(e - 128), exact for every byte (subnormal below e = 2).
ODMOE_HD float E8M0Half(uint32_t e) { return BitsFloat(e < 2 ? 0x00200000u << e : (e - 1) << 23); }

/// The 32-bit word at p for a block format: 16-bit loads when every block of
/// the type starts at an even offset, byte loads otherwise (MXFP4).
template <DType T>
ODMOE_HD uint32_t LoadBlockWord(const uint8_t* p) {
  constexpr Block32Format F = Block32FormatOf<T>();
  if constexpr (F.bytes % 2 == 0) {
    return LoadU32Even(p);
  } else {
    return LoadU32Bytes(p);
  }
}

/// Word m (elements 4m..4m+3, one signed byte each) of the qw codes of a
/// stored block.
template <DType T>
ODMOE_HD int32_t Block32CodeWord(const uint8_t* block, int m) {
  constexpr Block32Format F = Block32FormatOf<T>();
  static_assert(F.bytes > 0, "Block32CodeWord: not a block32 type");
  if constexpr (F.map == CodeMap::kInt8) {
    return static_cast<int32_t>(LoadBlockWord<T>(block + F.qs_offset + 4 * m));
  } else {
    // Elements 0..15 are the low nibbles of qs[0..15], 16..31 the high ones.
    const uint32_t bytes = LoadBlockWord<T>(block + F.qs_offset + 4 * (m % 4));
    uint32_t q = (m < 4 ? bytes : bytes >> 4) & 0x0f0f0f0fu;
    if constexpr (F.qh_offset >= 0) {  // fifth bits of elements 4m..4m+3
      const uint32_t h = (LoadU32Even(block + F.qh_offset) >> (4 * m)) & 0xfu;
      q |= ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4;
    }
    if constexpr (F.map == CodeMap::kMinus8) return BytesMinus(q, 8);
    if constexpr (F.map == CodeMap::kMinus16) return BytesMinus(q, 16);
    if constexpr (F.map == CodeMap::kIq4nlTable)
      return LookupNibbles(kIq4nlLut.lo, kIq4nlLut.hi, q);
    if constexpr (F.map == CodeMap::kMxfp4Table)
      return LookupNibbles(kMxfp4Lut.lo, kMxfp4Lut.hi, q);
    return static_cast<int32_t>(q);  // kUnsigned
  }
}

/// The scale dw of a stored block.
template <DType T>
ODMOE_HD float Block32Scale(const uint8_t* block) {
  constexpr Block32Format F = Block32FormatOf<T>();
  if constexpr (F.e8m0_scale) {
    return E8M0Half(block[F.scale_offset]);
  } else {
    return F16ToF32(LoadU16(block + F.scale_offset));
  }
}

/// The min mw of a stored block (0 for types without one).
template <DType T>
ODMOE_HD float Block32Min(const uint8_t* block) {
  constexpr Block32Format F = Block32FormatOf<T>();
  if constexpr (F.min_offset >= 0) {
    return F16ToF32(LoadU16(block + F.min_offset));
  } else {
    return 0.0f;
  }
}

/// One stored block decoded for the dot: 8 words of codes, scale and min.
struct Block32Weights {
  int32_t codes[8];
  float d;
  float m;
};

template <DType T>
ODMOE_HD void DecodeBlock32(const uint8_t* block, Block32Weights* w) {
  for (int m = 0; m < 8; ++m) w->codes[m] = Block32CodeWord<T>(block, m);
  w->d = Block32Scale<T>(block);
  w->m = Block32Min<T>(block);
}

/// The exact integer sum of one block: sum_i qw_i * qx_i.
ODMOE_HD int32_t BlockIsum(const int32_t* wcodes, const QActBlock& x) {
  int32_t s = 0;
  for (int w = 0; w < 8; ++w) s = Dot4(wcodes[w], x.qs[w], s);
  return s;
}

/// The canonical float step of one block: lane = fma(dw * dx, (float)isum, lane).
ODMOE_HD float QAccumulate(float dw, float dx, int32_t isum, float lane) {
  return Fma(dw * dx, static_cast<float>(isum), lane);
}

/// Both canonical steps of one block against one activation block.
template <DType T>
ODMOE_HD float Block32Step(const Block32Weights& w, const QActBlock& x, float dx, float lane) {
  lane = QAccumulate(w.d, dx, BlockIsum(w.codes, x), lane);
  if constexpr (Block32FormatOf<T>().min_offset >= 0) {
    lane = QAccumulate(w.m, dx, ActCodeSum(x), lane);
  }
  return lane;
}

/// Lane `lane` of the canonical quantized dot of one stored weight row with
/// one quantized activation row (blocks lane, lane + 16, ... < n_blocks).
template <DType T>
ODMOE_HD float LaneQDot(const uint8_t* w_row, const QActBlock* x, const float* x_scales,
                        int64_t n_blocks, int lane) {
  float acc = 0.0f;
  for (int64_t b = lane; b < n_blocks; b += kLanes) {
    Block32Weights w;
    DecodeBlock32<T>(w_row + b * Block32FormatOf<T>().bytes, &w);
    acc = Block32Step<T>(w, x[b], x_scales[b], acc);
  }
  return acc;
}

/// Element i of a stored block32 row, dequantized exactly as tensor/quant.h's
/// DequantizeRow: d * q, or d * q + m for the types with a min.
template <DType T>
ODMOE_HD float Block32Element(const uint8_t* row, int64_t i) {
  constexpr Block32Format F = Block32FormatOf<T>();
  const uint8_t* block = row + (i / 32) * F.bytes;
  const int e = static_cast<int>(i % 32);
  const int32_t word = Block32CodeWord<T>(block, e / 4);
  const float q = static_cast<float>(static_cast<int8_t>((word >> (8 * (e % 4))) & 0xff));
  if constexpr (F.min_offset >= 0) {
    return Block32Scale<T>(block) * q + Block32Min<T>(block);
  } else {
    return Block32Scale<T>(block) * q;
  }
}

}  // namespace odmoe::cuda_numerics
