// The CUDA kernels' arithmetic for the K family (Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_XS: 256-element super-blocks) and their Q8_K activations,
// `__host__ __device__` like cuda_numerics.h, so the host tests check it bit
// for bit against the CPU backend (cpu_backend.h, "MatMul with K-family
// weights", steps A-D) and tensor/quant.h.
//
//   using namespace odmoe::cuda_numerics;
//   QActSuperBlock xq[n_super];
//   for (s...) QuantizeBlockQ8_K(x + 256 * s, &xq[s], nullptr);   // step A
//   float lanes[16];
//   for (int l = 0; l < 16; ++l) lanes[l] = LaneKDot<DType::kQ4_K>(w_row, xq, n_super, l);
//   float y = TreeReduce16(lanes);       // == CpuBackend's MatMul element (D)
//
// Super-block s updates lane s % 16 (step C): lane = fma(dw * dx, (float)A,
// lane), then for the types with mins lane = fma(-(dmin * dx), (float)B,
// lane), where A = sum_j sc_j * isum_j and B = sum_j mn_j * bsum_j are exact
// int32 sums over the sub-blocks j (step B). Every type is a row of a table
// (KFormatOf: block bytes, sub-block size, scale fields); what differs per
// type is only how a word of 4 codes and the sub-block scales are unpacked
// (KCodeWord, KSubScale), both exact integer work with the bit layouts of
// tensor/quant_blocks.h. Blocks are read in 16-bit words: rows must start at
// even addresses (every K block size and field offset is even).
#pragma once

#include "cuda_numerics.h"

namespace odmoe::cuda_numerics {

// ---- Q8_K activations ---------------------------------------------------------

/// One super-block of Q8_K activations as the kernels use it: 256 codes as 64
/// words (element e in byte e % 4 of word e / 4), the sums of each 16
/// consecutive codes, and the f32 scale d. 16-byte aligned, so the decode
/// kernel reads 8 code words with two 16-byte loads.
struct alignas(16) QActSuperBlock {
  int32_t qs[64];
  int32_t bsum[16];
  float d;
};
static_assert(sizeof(QActSuperBlock) == 336);

/// The running choice of the element of largest magnitude: strict '>' keeps
/// the first one on ties, NaN is never taken.
struct AbsMaxPick {
  float amax = 0.0f;
  float max = 0.0f;  // the element itself, sign kept
  int index = -1;
};

ODMOE_HD void PickAbsMax(AbsMaxPick* p, float v, int index) {
  const float a = Abs(v);
  if (a > p->amax) {
    p->amax = a;
    p->max = v;
    p->index = index;
  }
}

/// Merges two picks over disjoint index ranges into the pick of their union
/// (larger magnitude, then lower index), so any split and order of merges
/// gives the sequential scan's result.
ODMOE_HD AbsMaxPick MergeAbsMax(const AbsMaxPick& a, const AbsMaxPick& b) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (b.amax > a.amax || (b.amax == a.amax && b.index < a.index)) return b;
  return a;
}

/// min(127, round-half-to-even(v)), NaN and v >= 127.5 giving 127 and
/// v <= -127.5 giving -127, as tensor/quant.h's Q8_K quantizer.
ODMOE_HD int Q8KRound(float v) {
  if (!(v < 127.5f)) return 127;
  if (!(v > -127.5f)) return -127;
  const float shifted = v + 12582912.0f;  // 1.5 * 2^23: the integer lands in the low bits
  return static_cast<int>(FloatBits(shifted) & 0x007fffffu) - 0x00400000;
}

/// The code factor of a super-block from its pick: -127 / max (0 when no
/// element is nonzero and not NaN: QuantizeRow then stores an all-zero block).
ODMOE_HD float Q8KInverseScale(const AbsMaxPick& p) {
  return p.amax == 0.0f ? 0.0f : -127.0f / p.max;
}

/// Four codes of elements x[0..3] as one word.
ODMOE_HD int32_t Q8KCodeWord(float iscale, const float* x) {
  uint32_t word = 0;
  for (int b = 0; b < 4; ++b) {
    word |= (static_cast<uint32_t>(Q8KRound(iscale * x[b])) & 0xffu) << (8 * b);
  }
  return static_cast<int32_t>(word);
}

/// One super-block of QuantizeRow(kQ8_K, ...): amax with its sign kept,
/// iscale = -127 / max, codes min(127, round-half-even(iscale * x)),
/// d = 1 / iscale, per-16 code sums. `raw` (optional) receives the stored
/// BlockQ8K. Returns d.
ODMOE_HD float QuantizeBlockQ8_K(const float* x, QActSuperBlock* out, BlockQ8K* raw) {
  AbsMaxPick p;
  for (int i = 0; i < kSuperBlockElems; ++i) PickAbsMax(&p, x[i], i);
  const bool zero = p.amax == 0.0f;  // stored as an all-zero block
  const float iscale = Q8KInverseScale(p);
  for (int w = 0; w < 64; ++w) out->qs[w] = zero ? 0 : Q8KCodeWord(iscale, x + 4 * w);
  for (int j = 0; j < 16; ++j) {
    int32_t s = 0;
    for (int w = 4 * j; w < 4 * j + 4; ++w) s = Dot4(out->qs[w], 0x01010101, s);
    out->bsum[j] = s;
  }
  out->d = zero ? 0.0f : 1.0f / iscale;
  if (raw != nullptr) {
    raw->d = out->d;
    for (int i = 0; i < kSuperBlockElems; ++i) {
      raw->qs[i] = static_cast<int8_t>((out->qs[i / 4] >> (8 * (i % 4))) & 0xff);
    }
    for (int j = 0; j < 16; ++j) raw->bsums[j] = static_cast<int16_t>(out->bsum[j]);
  }
  return out->d;
}

// ---- The table of K formats -----------------------------------------------------

enum class KScaleKind {
  kQ2,       // scales[j]: low nibble scale, high nibble min
  kSixBit3,  // Q3_K: 16 six-bit scales biased by 32 in 12 bytes
  kSixBit4,  // Q4_K / Q5_K: 8 six-bit scales and mins in 12 bytes
  kInt8,     // Q6_K: int8 scales
  kIq4Xs,    // IQ4_XS: scales_l nibbles + scales_h bit pairs, biased by 32
};

struct KFormat {
  int bytes;
  int sub_elems;     // 16 or 32 elements per sub-block
  int d_offset;      // f16 d
  int dmin_offset;   // f16 dmin; -1: no mins (no B sum)
  int scale_offset;  // packed sub-block scales
  KScaleKind scales;
};

template <DType T>
ODMOE_HD constexpr KFormat KFormatOf() {
  if constexpr (T == DType::kQ2_K) return {84, 16, 80, 82, 0, KScaleKind::kQ2};
  if constexpr (T == DType::kQ3_K) return {110, 16, 108, -1, 96, KScaleKind::kSixBit3};
  if constexpr (T == DType::kQ4_K) return {144, 32, 0, 2, 4, KScaleKind::kSixBit4};
  if constexpr (T == DType::kQ5_K) return {176, 32, 0, 2, 4, KScaleKind::kSixBit4};
  if constexpr (T == DType::kQ6_K) return {210, 16, 208, -1, 192, KScaleKind::kInt8};
  if constexpr (T == DType::kIQ4_XS) return {136, 32, 0, -1, 2, KScaleKind::kIq4Xs};
  return {0, 0, 0, -1, 0, KScaleKind::kInt8};
}

ODMOE_HD constexpr bool IsKFamily(DType t) {
  return t == DType::kQ2_K || t == DType::kQ3_K || t == DType::kQ4_K || t == DType::kQ5_K ||
         t == DType::kQ6_K || t == DType::kIQ4_XS;
}

/// The integer scale *sc and min *mn (0 for types without mins) of sub-block
/// j, unpacked from the stored bits (the device twin of
/// tensor/quant_k_scales.h). `j` may be a run-time value: nothing is indexed
/// in registers.
template <DType T>
ODMOE_HD void KSubScale(const uint8_t* sb, int j, int32_t* sc, int32_t* mn) {
  constexpr KFormat F = KFormatOf<T>();
  const uint8_t* p = sb + F.scale_offset;
  *mn = 0;
  if constexpr (F.scales == KScaleKind::kQ2) {
    *sc = p[j] & 15;
    *mn = p[j] >> 4;
  } else if constexpr (F.scales == KScaleKind::kSixBit3) {
    const int low = j < 8 ? (p[j] & 15) : (p[j - 8] >> 4);
    const int high = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
    *sc = (low | (high << 4)) - 32;
  } else if constexpr (F.scales == KScaleKind::kSixBit4) {
    if (j < 4) {
      *sc = p[j] & 63;
      *mn = p[j + 4] & 63;
    } else {
      *sc = (p[j + 4] & 15) | ((p[j - 4] >> 6) << 4);
      *mn = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
    }
  } else if constexpr (F.scales == KScaleKind::kInt8) {
    *sc = static_cast<int8_t>(p[j]);
  } else {
    const int low = (p[2 + j / 2] >> (4 * (j % 2))) & 15;
    const int high = static_cast<int>(LoadU16(p) >> (2 * j)) & 3;
    *sc = (low | (high << 4)) - 32;
  }
}

/// KSubScale of every sub-block j < 256 / sub_elems.
template <DType T>
ODMOE_HD void KSubScales(const uint8_t* sb, int32_t* sc, int32_t* mn) {
  constexpr int kSubs = kSuperBlockElems / KFormatOf<T>().sub_elems;
  for (int j = 0; j < kSubs; ++j) KSubScale<T>(sb, j, &sc[j], &mn[j]);
}

inline constexpr Lut16 kIq4XsLut = MakeLut16(kIq4nlValues);

/// Word m (elements 4m..4m+3 of sub-block j, one signed byte each) of the qw
/// codes of a stored super-block (the bit layouts of tensor/quant_blocks.h).
template <DType T>
ODMOE_HD int32_t KCodeWord(const uint8_t* sb, int j, int m) {
  if constexpr (T == DType::kQ2_K || T == DType::kQ3_K) {
    // Element 16j + t: 2-bit field (j % 8) / 2 of qs[32 (j / 8) + 16 (j % 2) + t].
    const int l0 = 16 * (j % 2) + 4 * m;
    const int shift = 2 * ((j % 8) / 2);
    const int qs_offset = T == DType::kQ2_K ? 16 : 32;
    const uint32_t low = (LoadU32Even(sb + qs_offset + 32 * (j / 8) + l0) >> shift) & 0x03030303u;
    if constexpr (T == DType::kQ2_K) {
      return static_cast<int32_t>(low);
    } else {  // hmask[l] bit 4 (j / 8) + (j % 8) / 2 is worth 4; codes - 4
      const uint32_t high = (LoadU32Even(sb + l0) >> (4 * (j / 8) + (j % 8) / 2)) & 0x01010101u;
      return BytesMinus(low | (high << 2), 4);
    }
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    // Element 32j + l: nibble j % 2 of qs[32 (j / 2) + l]; Q5_K: bit j of qh[l].
    const int qs_offset = T == DType::kQ4_K ? 16 : 48;
    uint32_t q =
        (LoadU32Even(sb + qs_offset + 32 * (j / 2) + 4 * m) >> (4 * (j % 2))) & 0x0f0f0f0fu;
    if constexpr (T == DType::kQ5_K) q |= ((LoadU32Even(sb + 16 + 4 * m) >> j) & 0x01010101u) << 4;
    return static_cast<int32_t>(q);
  } else if constexpr (T == DType::kQ6_K) {
    // Element 128h + r (r = 16 (j % 8) + t): low nibble r / 64 of
    // ql[64h + r % 64], high bit pair r / 32 of qh[32h + r % 32]; codes - 32.
    const int h = j / 8;
    const int r0 = 16 * (j % 8) + 4 * m;
    const uint32_t low = (LoadU32Even(sb + 64 * h + r0 % 64) >> (4 * (r0 / 64))) & 0x0f0f0f0fu;
    const uint32_t high =
        (LoadU32Even(sb + 128 + 32 * h + r0 % 32) >> (2 * (r0 / 32))) & 0x03030303u;
    return BytesMinus(low | (high << 4), 32);
  } else {
    static_assert(T == DType::kIQ4_XS, "KCodeWord: a K-family type");
    // Element 32j + t: nibble t / 16 of qs[16j + t % 16], through the table.
    const uint32_t bytes = LoadU32Even(sb + 8 + 16 * j + 4 * (m % 4));
    return LookupNibbles(kIq4XsLut.lo, kIq4XsLut.hi, (m < 4 ? bytes : bytes >> 4) & 0x0f0f0f0fu);
  }
}

/// Step B restricted to COUNT sub-blocks from j0, for NX activation rows at
/// once (the weight codes are decoded once): a[t] = sum_j sc_j * isum_j(t),
/// b[t] = sum_j mn_j * bsum_j(t) over j in [j0, j0 + COUNT) for the
/// super-block `sb` and the activation super-blocks x[t * x_stride], t < nt.
/// Integer sums are exact, so the parts of a super-block added in any order
/// give KSuperBlockSums (the kernels split a super-block between threads).
template <DType T, int NX, int COUNT>
ODMOE_HD void KSuperBlockSumsPart(const uint8_t* sb, const QActSuperBlock* x, int64_t x_stride,
                                  int nt, int j0, int32_t* a, int32_t* b) {
  constexpr KFormat F = KFormatOf<T>();
  constexpr int kWords = F.sub_elems / 4;
  ODMOE_UNROLL
  for (int t = 0; t < NX; ++t) a[t] = b[t] = 0;
  ODMOE_UNROLL
  for (int jj = 0; jj < COUNT; ++jj) {
    const int j = j0 + jj;
    int32_t sc, mn;
    KSubScale<T>(sb, j, &sc, &mn);
    int32_t w[kWords];
    ODMOE_UNROLL
    for (int m = 0; m < kWords; ++m) w[m] = KCodeWord<T>(sb, j, m);
    ODMOE_UNROLL
    for (int t = 0; t < NX; ++t) {
      if (t >= nt) break;
      const QActSuperBlock& xt = x[t * x_stride];
      int32_t isum = 0;
      ODMOE_UNROLL
      for (int m = 0; m < kWords; ++m) isum = Dot4(w[m], xt.qs[kWords * j + m], isum);
      a[t] += sc * isum;
      if constexpr (F.dmin_offset >= 0) {
        const int32_t bsum = kWords == 4 ? xt.bsum[j] : xt.bsum[2 * j] + xt.bsum[2 * j + 1];
        b[t] += mn * bsum;
      }
    }
  }
}

/// Step B for NX activation rows at once over the whole super-block.
template <DType T, int NX>
ODMOE_HD void KSuperBlockSums(const uint8_t* sb, const QActSuperBlock* x, int64_t x_stride, int nt,
                              int32_t* a, int32_t* b) {
  constexpr int kSubs = kSuperBlockElems / KFormatOf<T>().sub_elems;
  KSuperBlockSumsPart<T, NX, kSubs>(sb, x, x_stride, nt, 0, a, b);
}

/// Step C for one super-block and one activation row.
template <DType T>
ODMOE_HD float KStep(const uint8_t* sb, float dx, int32_t a, int32_t b, float lane) {
  constexpr KFormat F = KFormatOf<T>();
  lane = Fma(F16ToF32(LoadU16(sb + F.d_offset)) * dx, static_cast<float>(a), lane);
  if constexpr (F.dmin_offset >= 0) {
    lane = Fma(-(F16ToF32(LoadU16(sb + F.dmin_offset)) * dx), static_cast<float>(b), lane);
  }
  return lane;
}

/// Lane `lane` of the canonical K-family dot of one stored weight row with
/// one Q8_K activation row (super-blocks lane, lane + 16, ... < n_super).
template <DType T>
ODMOE_HD float LaneKDot(const uint8_t* w_row, const QActSuperBlock* x, int64_t n_super, int lane) {
  float acc = 0.0f;
  for (int64_t s = lane; s < n_super; s += kLanes) {
    const uint8_t* sb = w_row + s * KFormatOf<T>().bytes;
    int32_t a, b;
    KSuperBlockSums<T, 1>(sb, x + s, 0, 1, &a, &b);
    acc = KStep<T>(sb, x[s].d, a, b, acc);
  }
  return acc;
}

// ---- The decode kernel's split: quarters of a super-block ------------------------
//
// The one-row MatMul kernel gives each super-block to four threads; thread q
// takes quarter q: two runs of 32 elements (8 activation words each) and the
// code bytes that hold them, read with the widest loads the type's field
// alignment allows (KVecAlign). The four quarters' exact int32 sums add up to
// KSuperBlockSums (integer sums in any order), so the float step and the lane
// order stay those of the canonical dot.

/// The alignment of every code field a quarter reads, given a row start
/// aligned to it: Q4_K / Q5_K blocks are 16-byte multiples, IQ4_XS 8, Q2_K
/// 4; Q3_K and Q6_K blocks (110, 210 bytes) are only 2-byte aligned.
template <DType T>
ODMOE_HD constexpr int KVecAlign() {
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) return 16;
  if constexpr (T == DType::kIQ4_XS) return 8;
  if constexpr (T == DType::kQ2_K) return 4;
  return 2;
}

/// The 16 bytes at p (16-byte aligned on the device) as 4 little-endian words.
ODMOE_HD void LoadVec16(const uint8_t* p, uint32_t* w) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
#else
  std::memcpy(w, p, 16);
#endif
}

/// The 8 bytes at p (8-byte aligned on the device) as 2 words.
ODMOE_HD void LoadVec8(const uint8_t* p, uint32_t* w) {
#if defined(__CUDA_ARCH__)
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
  w[0] = v.x;
  w[1] = v.y;
#else
  std::memcpy(w, p, 8);
#endif
}

/// The 4 bytes at p (4-byte aligned on the device) as a word.
ODMOE_HD uint32_t LoadU32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const uint32_t*>(p));
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

/// (hi:lo) >> sh, sh < 32: the word that starts sh / 8 bytes into lo.
ODMOE_HD uint32_t FunnelRight(uint32_t lo, uint32_t hi, uint32_t sh) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, sh);
#else
  return sh == 0 ? lo : (lo >> sh) | (hi << (32 - sh));
#endif
}

/// The 32 bytes at p as 8 words, p aligned to kAlign (16, 8, 4 or 2). At 2
/// the bytes come from the 16-byte lines that hold them (two loads when p is
/// on a line, three otherwise), each word shifted out of two neighbours; those
/// lines may reach up to 14 bytes before p and 14 after p + 32, so the caller
/// keeps that much readable memory around the run (every K block does, inside
/// itself, for the runs KQuarterSums reads from a 16-byte aligned row base).
template <int kAlign>
ODMOE_HD void LoadRun8(const uint8_t* p, uint32_t* w) {
  if constexpr (kAlign >= 16) {
    LoadVec16(p, w);
    LoadVec16(p + 16, w + 4);
  } else if constexpr (kAlign >= 8) {
    ODMOE_UNROLL
    for (int i = 0; i < 4; ++i) LoadVec8(p + 8 * i, w + 2 * i);
  } else if constexpr (kAlign >= 4) {
    ODMOE_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = LoadU32(p + 4 * i);
  } else {
    const int off = static_cast<int>(reinterpret_cast<uintptr_t>(p) & 15u);
    const uint8_t* line = p - off;
    uint32_t v[12];
    LoadVec16(line, v);
    LoadVec16(line + 16, v + 4);
    if (off != 0) {
      LoadVec16(line + 32, v + 8);
    } else {
      v[8] = v[9] = v[10] = v[11] = 0;
    }
    // Word i of the run starts at byte off + 4i: word k4 + i of the lines,
    // shifted by the rest. k4 picks among four neighbours without indexing
    // (the words stay in registers).
    const int k4 = off / 4;
    const uint32_t sh = 8u * static_cast<uint32_t>(off % 4);
    uint32_t s[9];
    ODMOE_UNROLL
    for (int i = 0; i < 9; ++i) {
      const uint32_t lo = (k4 & 1) != 0 ? v[i + 1] : v[i];
      const uint32_t hi = (k4 & 1) != 0 ? v[i + 3] : v[i + 2];
      s[i] = (k4 & 2) != 0 ? hi : lo;
    }
    ODMOE_UNROLL
    for (int i = 0; i < 8; ++i) w[i] = FunnelRight(s[i], s[i + 1], sh);
  }
}

/// The signed code words of quarter q (0..3) of the stored super-block `sb`:
/// codes[r][m] holds elements base[r] + 4m .. + 3 of run r (base[r] a
/// multiple of 32). The bit layouts are those of KCodeWord.
template <DType T>
ODMOE_HD void KQuarterCodes(const uint8_t* sb, int q, int32_t (*codes)[8], int* base) {
  constexpr int kAlign = KVecAlign<T>();
  uint32_t lw[8];
  if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    // Sub-blocks 2q (low nibbles) and 2q + 1 (high) of qs[32q .. 32q + 31].
    LoadRun8<kAlign>(sb + (T == DType::kQ4_K ? 16 : 48) + 32 * q, lw);
    uint32_t hw[8] = {};
    if constexpr (T == DType::kQ5_K) LoadRun8<kAlign>(sb + 16, hw);  // qh: bit j of qh[l]
    ODMOE_UNROLL
    for (int r = 0; r < 2; ++r) {
      base[r] = 64 * q + 32 * r;
      ODMOE_UNROLL
      for (int m = 0; m < 8; ++m) {
        uint32_t c = (lw[m] >> (4 * r)) & 0x0f0f0f0fu;
        if constexpr (T == DType::kQ5_K) c |= ((hw[m] >> (2 * q + r)) & 0x01010101u) << 4;
        codes[r][m] = static_cast<int32_t>(c);
      }
    }
  } else if constexpr (T == DType::kIQ4_XS) {
    // Sub-block j = 2q + r: nibble t / 16 of qs[16j + t % 16], through the table.
    LoadRun8<kAlign>(sb + 8 + 32 * q, lw);
    ODMOE_UNROLL
    for (int r = 0; r < 2; ++r) {
      base[r] = 64 * q + 32 * r;
      ODMOE_UNROLL
      for (int m = 0; m < 8; ++m) {
        const uint32_t bytes = lw[4 * r + m % 4];
        codes[r][m] =
            LookupNibbles(kIq4XsLut.lo, kIq4XsLut.hi, (m < 4 ? bytes : bytes >> 4) & 0x0f0f0f0fu);
      }
    }
  } else if constexpr (T == DType::kQ2_K || T == DType::kQ3_K) {
    // Run r: sub-blocks 4q + 2r, 4q + 2r + 1, the 2-bit field f = 2 (q % 2) + r
    // of qs[32 (q / 2) .. + 31]; Q3_K: bit 4 (q / 2) + f of hmask[0 .. 31].
    LoadRun8<kAlign>(sb + (T == DType::kQ2_K ? 16 : 32) + 32 * (q / 2), lw);
    uint32_t hw[8] = {};
    if constexpr (T == DType::kQ3_K) LoadRun8<kAlign>(sb, hw);
    ODMOE_UNROLL
    for (int r = 0; r < 2; ++r) {
      base[r] = 64 * q + 32 * r;
      const int f = 2 * (q % 2) + r;
      ODMOE_UNROLL
      for (int m = 0; m < 8; ++m) {
        const uint32_t low = (lw[m] >> (2 * f)) & 0x03030303u;
        if constexpr (T == DType::kQ2_K) {
          codes[r][m] = static_cast<int32_t>(low);
        } else {
          const uint32_t high = (hw[m] >> (4 * (q / 2) + f)) & 0x01010101u;
          codes[r][m] = BytesMinus(low | (high << 2), 4);
        }
      }
    }
  } else {
    static_assert(T == DType::kQ6_K, "KQuarterCodes: a K-family type");
    // h = q / 2, u = q % 2: run r is elements 128h + 64r + 32u + i, the nibble
    // r of ql[64h + 32u + i] and the bit pair u + 2r of qh[32h + i]; codes - 32.
    const int h = q / 2, u = q % 2;
    uint32_t hw[8];
    LoadRun8<kAlign>(sb + 64 * h + 32 * u, lw);
    LoadRun8<kAlign>(sb + 128 + 32 * h, hw);
    ODMOE_UNROLL
    for (int r = 0; r < 2; ++r) {
      base[r] = 128 * h + 64 * r + 32 * u;
      ODMOE_UNROLL
      for (int m = 0; m < 8; ++m) {
        const uint32_t low = (lw[m] >> (4 * r)) & 0x0f0f0f0fu;
        const uint32_t high = (hw[m] >> (2 * (u + 2 * r))) & 0x03030303u;
        codes[r][m] = BytesMinus(low | (high << 4), 32);
      }
    }
  }
}

/// Step B over quarter q of the super-block `sb` for NX activation rows
/// (x[t * x_stride], t < nt; a[t] = b[t] = 0 for t >= nt): the part of
/// KSuperBlockSums that thread q of the decode kernel adds.
template <DType T, int NX>
ODMOE_HD void KQuarterSums(const uint8_t* sb, int q, const QActSuperBlock* x, int64_t x_stride,
                           int nt, int32_t* a, int32_t* b) {
  constexpr KFormat F = KFormatOf<T>();
  constexpr int kSubs = 32 / F.sub_elems;  // sub-blocks per run
  constexpr int kWords = 8 / kSubs;        // code words per sub-block
  int32_t codes[2][8];
  int base[2];
  KQuarterCodes<T>(sb, q, codes, base);
  ODMOE_UNROLL
  for (int t = 0; t < NX; ++t) a[t] = b[t] = 0;
  ODMOE_UNROLL
  for (int r = 0; r < 2; ++r) {
    int32_t sc[kSubs], mn[kSubs];
    ODMOE_UNROLL
    for (int i = 0; i < kSubs; ++i) KSubScale<T>(sb, base[r] / F.sub_elems + i, &sc[i], &mn[i]);
    ODMOE_UNROLL
    for (int t = 0; t < NX; ++t) {
      if (t >= nt) break;
      const QActSuperBlock& xt = x[t * x_stride];
      uint32_t xw[8];
      LoadRun8<16>(reinterpret_cast<const uint8_t*>(xt.qs + base[r] / 4), xw);
      ODMOE_UNROLL
      for (int i = 0; i < kSubs; ++i) {
        int32_t isum = 0;
        ODMOE_UNROLL
        for (int m = kWords * i; m < kWords * (i + 1); ++m) {
          isum = Dot4(codes[r][m], static_cast<int32_t>(xw[m]), isum);
        }
        a[t] += sc[i] * isum;
        if constexpr (F.dmin_offset >= 0) {
          const int j = base[r] / F.sub_elems + i;
          b[t] += mn[i] * (kSubs == 1 ? xt.bsum[2 * j] + xt.bsum[2 * j + 1] : xt.bsum[j]);
        }
      }
    }
  }
}

/// Element i of a stored K-family row, dequantized exactly as tensor/quant.h's
/// DequantizeRow: (d * sc) * q, minus dmin * mn for the types with mins.
template <DType T>
ODMOE_HD float KElement(const uint8_t* row, int64_t i) {
  constexpr KFormat F = KFormatOf<T>();
  const uint8_t* sb = row + (i / kSuperBlockElems) * F.bytes;
  const int e = static_cast<int>(i % kSuperBlockElems);
  const int j = e / F.sub_elems;
  const int t = e % F.sub_elems;
  const int32_t word = KCodeWord<T>(sb, j, t / 4);
  const float q = static_cast<float>(static_cast<int8_t>((word >> (8 * (t % 4))) & 0xff));
  int32_t sc, mn;
  KSubScale<T>(sb, j, &sc, &mn);
  const float dl = F16ToF32(LoadU16(sb + F.d_offset)) * static_cast<float>(sc);
  if constexpr (F.dmin_offset >= 0) {
    const float ml = F16ToF32(LoadU16(sb + F.dmin_offset)) * static_cast<float>(mn);
    return dl * q - ml;
  } else {
    return dl * q;
  }
}

}  // namespace odmoe::cuda_numerics
