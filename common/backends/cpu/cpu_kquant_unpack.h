// Scalar unpacking of K-family super-blocks into KUnpacked (cpu_kquant.h),
// internal to the CPU backend.
//
// KUnpackScales<type> fills the per-sub-block fields (sc, mn, corr),
// KUnpackCodes<type> the 256 codes (the caller decodes d and dmin). Together they are
// the definition of the unpacked layout (CpuKQuantUnpackReference); the SIMD
// tables unpack the codes their own way and reuse the scale part.
//
// Every translation unit includes this header before its target pragma, so
// all of them compile the same portable code and the linker may keep any copy.
//
//   KUnpacked u;
//   KUnpackScalesQ4K(*reinterpret_cast<const BlockQ4K*>(block), &u);
//   KUnpackCodesQ4K(*reinterpret_cast<const BlockQ4K*>(block), &u);
#pragma once

#include <cstdint>

#include "cpu_kquant.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_k_codes.h"
#include "tensor/quant_k_scales.h"
#include "util/fp16.h"

namespace odmoe {

// Offsets that make every code non-negative: q_unsigned = qw + offset.
inline constexpr int kQ6KCodeOffset = 32;
inline constexpr int kQ3KCodeOffset = 4;

/// 32-element sub-block j's values to the 16-element entries 2j and 2j + 1.
template <class S, class M>
inline void KSpread8(const S* sc, const M* mn, int corr_offset, KUnpacked* out) {
  for (int j = 0; j < 8; ++j) {
    out->sc[2 * j] = out->sc[2 * j + 1] = static_cast<int16_t>(sc[j]);
    out->mn[2 * j] = out->mn[2 * j + 1] = mn == nullptr ? 0 : static_cast<int16_t>(mn[j]);
    out->corr[2 * j] = out->corr[2 * j + 1] = static_cast<int16_t>(-corr_offset * sc[j]);
  }
}

inline void KUnpackScalesQ4K(const BlockQ4K& b, KUnpacked* out) {
  uint8_t sc[8], mn[8];
  UnpackQ4KScalesMins(b.scales, sc, mn);
  KSpread8(sc, mn, 0, out);
}

inline void KUnpackScalesQ5K(const BlockQ5K& b, KUnpacked* out) {
  uint8_t sc[8], mn[8];
  UnpackQ4KScalesMins(b.scales, sc, mn);
  KSpread8(sc, mn, 0, out);
}

inline void KUnpackScalesIq4Xs(const BlockIq4Xs& b, KUnpacked* out) {
  int8_t sc[8];
  UnpackIq4XsScales(b.scales_h, b.scales_l, sc);
  KSpread8(sc, static_cast<const int8_t*>(nullptr), 0, out);
}

inline void KUnpackScalesQ2K(const BlockQ2K& b, KUnpacked* out) {
  uint8_t sc[16], mn[16];
  UnpackQ2KScalesMins(b.scales, sc, mn);
  for (int j = 0; j < 16; ++j) {
    out->sc[j] = sc[j];
    out->mn[j] = mn[j];
    out->corr[j] = 0;
  }
}

inline void KUnpackScalesQ3K(const BlockQ3K& b, KUnpacked* out) {
  int8_t sc[16];
  UnpackQ3KScales(b.scales, sc);
  for (int j = 0; j < 16; ++j) {
    out->sc[j] = sc[j];
    out->mn[j] = 0;
    out->corr[j] = static_cast<int16_t>(-kQ3KCodeOffset * sc[j]);
  }
}

inline void KUnpackScalesQ6K(const BlockQ6K& b, KUnpacked* out) {
  for (int j = 0; j < 16; ++j) {
    out->sc[j] = b.scales[j];
    out->mn[j] = 0;
    out->corr[j] = static_cast<int16_t>(-kQ6KCodeOffset * b.scales[j]);
  }
}

// ---- Codes (element order, tensor/quant_k_codes.h) made unsigned ----

inline void KUnpackCodesQ2K(const BlockQ2K& b, KUnpacked* out) { UnpackQ2KCodes(b, out->q); }
inline void KUnpackCodesQ4K(const BlockQ4K& b, KUnpacked* out) { UnpackQ4KCodes(b, out->q); }
inline void KUnpackCodesQ5K(const BlockQ5K& b, KUnpacked* out) { UnpackQ5KCodes(b, out->q); }

inline void KUnpackCodesQ3K(const BlockQ3K& b, KUnpacked* out) {
  int8_t q[kSuperBlockElems];
  UnpackQ3KCodes(b, q);
  for (int i = 0; i < kSuperBlockElems; ++i)
    out->q[i] = static_cast<uint8_t>(q[i] + kQ3KCodeOffset);
}

inline void KUnpackCodesQ6K(const BlockQ6K& b, KUnpacked* out) {
  int8_t q[kSuperBlockElems];
  UnpackQ6KCodes(b, q);
  for (int i = 0; i < kSuperBlockElems; ++i)
    out->q[i] = static_cast<uint8_t>(q[i] + kQ6KCodeOffset);
}

/// IQ4_XS: the signed level kIq4nlValues[code] as a byte.
inline void KUnpackCodesIq4Xs(const BlockIq4Xs& b, KUnpacked* out) {
  int8_t q[kSuperBlockElems];
  UnpackIq4XsValues(b, q);
  for (int i = 0; i < kSuperBlockElems; ++i) out->q[i] = static_cast<uint8_t>(q[i]);
}

}  // namespace odmoe
