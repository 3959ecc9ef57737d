// The 256 integer codes of a K-family super-block, in element order.
//
// Shared by the reference conversions (tensor/quant_kfamily*.cpp) and the CPU
// kernels that prefill unpacked weights. Element i of a super-block belongs
// to sub-block i / 16 (Q2_K, Q3_K, Q6_K) or i / 32 (Q4_K, Q5_K, IQ4_XS);
// tensor/quant_k_scales.h unpacks the sub-block scales. Bit layout, for
// element i = 128 h + 32 s + l (h = 0..1, s = 0..3, l = 0..31) and, for
// the 32-element types, i = 64 c + 32 k + l (c = 0..3, k = 0..1):
//
//   Q2_K   q = (qs[32 h + l] >> 2 s) & 3                            (0..3)
//   Q3_K   q = ((qs[32 h + l] >> 2 s) & 3) + 4 * hbit - 4           (-4..3)
//          hbit = (hmask[l] >> (4 h + s)) & 1
//   Q4_K   q = (qs[32 c + l] >> 4 k) & 15                           (0..15)
//   Q5_K   the Q4_K nibble | ((qh[l] >> (2 c + k)) & 1) << 4        (0..31)
//   Q6_K   q = (((ql[64 h + r % 64] >> 4 (r / 64)) & 15)
//              | ((qh[32 h + l] >> 2 s) & 3) << 4) - 32, r = 32 s + l (-32..31)
//   IQ4_XS sub-block j = i / 32, t = i % 32:
//          q = kIq4nlValues[(qs[16 j + t % 16] >> 4 (t / 16)) & 15]
//
//   int8_t q[256];
//   UnpackQ3KCodes(block, q);  // q[i] in -4..3
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace odmoe {

inline void UnpackQ2KCodes(const BlockQ2K& b, uint8_t q[kSuperBlockElems]) {
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * s + l] = (b.qs[32 * h + l] >> (2 * s)) & 3;
    }
  }
}

inline void UnpackQ3KCodes(const BlockQ3K& b, int8_t q[kSuperBlockElems]) {
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 4; ++s) {
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * h + l] >> (2 * s)) & 3;
        const int high = (b.hmask[l] >> (4 * h + s)) & 1;
        q[128 * h + 32 * s + l] = static_cast<int8_t>(low + 4 * high - 4);
      }
    }
  }
}

inline void UnpackQ4KCodes(const BlockQ4K& b, uint8_t q[kSuperBlockElems]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 0x0f;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}

inline void UnpackQ5KCodes(const BlockQ5K& b, uint8_t q[kSuperBlockElems]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int high0 = (b.qh[l] >> (2 * c)) & 1;
      const int high1 = (b.qh[l] >> (2 * c + 1)) & 1;
      q[64 * c + l] = static_cast<uint8_t>((b.qs[32 * c + l] & 0x0f) | (high0 << 4));
      q[64 * c + 32 + l] = static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (high1 << 4));
    }
  }
}

inline void UnpackQ6KCodes(const BlockQ6K& b, int8_t q[kSuperBlockElems]) {
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 128; ++r) {
      const int low = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      q[128 * h + r] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
  }
}

/// IQ4_XS: the non-linear values kIq4nlValues[code] (-127..113).
inline void UnpackIq4XsValues(const BlockIq4Xs& b, int8_t q[kSuperBlockElems]) {
  for (int j = 0; j < 8; ++j) {
    for (int t = 0; t < 16; ++t) {
      q[32 * j + t] = kIq4nlValues[b.qs[16 * j + t] & 0x0f];
      q[32 * j + 16 + t] = kIq4nlValues[b.qs[16 * j + t] >> 4];
    }
  }
}

}  // namespace odmoe
