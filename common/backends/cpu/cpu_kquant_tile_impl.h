// K-family prefill kernels on KTiles (cpu_kquant.h) for AVX-512 VNNI
// (internal): included by cpu_kquant_avx512vnni.cpp after its target pragma
// and after cpu_kquant_avx512_impl.h (whose unpacker it reuses).
//
// Why: the row-major kernels (cpu_kquant_impl.h) spend two multiplies per 64
// codes and per activation row (maddubs, then the sub-block scale) plus a
// horizontal reduction per super-block. With 16 weight rows interleaved in
// groups of 4 codes, one vpdpbusd takes 4 codes of each of the 16 rows
// against 4 broadcast activation codes, the int32 lanes are the rows, the
// sub-block scale is one vpmulld per sub-block, and the canonical float step
// of cpu_backend.h (lane s % 16 of each row) becomes 16 accumulator vectors
// whose lanes are rows: no horizontal work at all. The code offset of Q3_K,
// Q6_K and IQ4_XS costs nothing per activation row: their tiles hold signed
// values against biased activations and a per-row constant (KTile::bias).
// The integers are the exact A_s / B_s and the float operations the
// canonical ones, in the same order, so the results are dot_rows' bits.
//
//   std::vector<KTile> t(superblocks);
//   pack(DType::kQ4_K, rows, row_bytes, nw, superblocks, t.data());
//   dot(DType::kQ4_K, t.data(), nw, superblocks, acts, n, y, ldy);
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"
#include "cpu_kquant_impl.h"
#include "cpu_kquant_tile_layout_impl.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): compiled for one target only

/// Elements per scale: Q4_K, Q5_K and IQ4_XS scale 32-element sub-blocks.
template <DType T>
constexpr int TileSubBlock() {
  return T == DType::kQ4_K || T == DType::kQ5_K || T == DType::kIQ4_XS ? 32 : 16;
}

/// out[c] lane r = in[r] lane c (16 x 16 dwords): 32-bit, then 64-bit
/// interleaves within 128-bit lanes, then two rounds of lane shuffles.
__attribute__((always_inline)) inline void Transpose16(const __m512i* in, __m512i* out) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
  }
  // u[4q + c], 128-bit lane L: rows 4q .. 4q + 3 of column 4L + c.
  for (int q = 0; q < 16; q += 4) {
    u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
    u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
    u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
    u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
    const __m512i w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    out[c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    out[c + 4] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    out[c + 8] = _mm512_shuffle_i32x4(v0, v1, 0xdd);
    out[c + 12] = _mm512_shuffle_i32x4(w0, w1, 0xdd);
  }
}

/// Bytes ahead of the current super-block that packing prefetches per row.
inline constexpr int64_t kPackPrefetchBytes = 1024;

/// Unpacks super-block s of 16 rows (row r's at rows + r * stride; rows
/// past nw as zeros, `u` zeroed by the caller) and transposes codes, scales
/// and mins into the tile layout. `prefetch` bytes past each row's block are
/// fetched ahead (0: none).
template <class K, DType T>
__attribute__((always_inline)) inline void PackTileBlock(const uint8_t* rows, size_t stride,
                                                         int nw, int64_t prefetch, KUnpacked* u,
                                                         KTile& t) {
  constexpr int64_t kBytes = kquant_impl::BlockBytes<T>();
  __m512i in[16], tr[16];
  for (int r = 0; r < nw; ++r) {
    const uint8_t* b = rows + r * stride;
    if (prefetch != 0) {
      for (int64_t off = 0; off < kBytes; off += 64) __builtin_prefetch(b + prefetch + off);
    }
    K::template Unpack<T>(b, &u[r]);
  }
  for (int m = 0; m < 4; ++m) {
    for (int r = 0; r < 16; ++r) in[r] = _mm512_load_si512(u[r].q + 64 * m);
    Transpose16(in, tr);
    for (int c = 0; c < 16; ++c) _mm512_store_si512(t.q[16 * m + c], TileCodes<T>(tr[c]));
  }
  for (int r = 0; r < 16; ++r) {
    in[r] = _mm512_cvtepi16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(u[r].sc)));
  }
  Transpose16(in, tr);
  for (int j = 0; j < 16; ++j) _mm512_store_si512(t.sc[j], tr[j]);
  if constexpr (kquant_impl::HasMins<T>()) {
    for (int r = 0; r < 16; ++r) {
      in[r] = _mm512_zextsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(u[r].mn)));
    }
    Transpose16(in, tr);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(t.mn[k], tr[k]);
  }
  for (int r = 0; r < 16; ++r) {
    t.d[r] = u[r].d;
    t.dmin[r] = u[r].dmin;
  }
  FinishTile<T>(t);
}

/// Packs nw <= 16 row-major rows, super-block by super-block.
template <class K, DType T>
void PackTileT(const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks, KTile* out) {
  constexpr int64_t kBytes = kquant_impl::BlockBytes<T>();
  alignas(64) KUnpacked u[kKTileRows];
  std::memset(static_cast<void*>(u), 0, sizeof(u));
  for (int64_t s = 0; s < superblocks; ++s) {
    // 16 rows are 16 streams: fetch ahead as decode does (KDotRowsStored).
    PackTileBlock<K, T>(w + s * kBytes, row_bytes, nw, kPackPrefetchBytes, u, out[s]);
  }
}

/// Super-block s of 16 row-order blocks (row r's at in + r * stride) to a
/// KInterleave16 super-block at `out` (16 words at a time through
/// Transpose16, then the 2-byte tails).
template <DType T>
__attribute__((always_inline)) inline void InterleaveBlock16(const uint8_t* in, size_t stride,
                                                             uint8_t* out) {
  constexpr int kBytes = kquant_impl::BlockBytes<T>();
  constexpr int kWords = kBytes / 4, kTail = kBytes % 4;
  __m512i v[16], tr[16];
  for (int w0 = 0; w0 < kWords; w0 += 16) {
    const int n = kWords - w0 < 16 ? kWords - w0 : 16;
    const __mmask16 keep = static_cast<__mmask16>((1u << n) - 1);
    for (int r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi32(keep, in + r * stride + 4 * w0);
    Transpose16(v, tr);
    for (int i = 0; i < n; ++i) _mm512_storeu_si512(out + 64 * (w0 + i), tr[i]);
  }
  if constexpr (kTail != 0) {
    for (int r = 0; r < 16; ++r) {
      std::memcpy(out + 64 * kWords + kTail * r, in + r * stride + 4 * kWords, kTail);
    }
  }
}

__attribute__((always_inline)) inline int32_t Load32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/// acc[t] += sum_j mn_j * bsum_j of activation row t (16-element sums in
/// pairs against KTile::mn, the mins).
template <int NX>
__attribute__((always_inline)) inline void AddSumsTimesMn(const KTile& tl,
                                                          const KActBlock* const* xs,
                                                          __m512i* acc) {
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i mn = _mm512_load_si512(tl.mn[k]);
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) {
      acc[t] = _mm512_dpwssd_epi32(acc[t], _mm512_set1_epi32(Load32(xs[t]->bsums + 2 * k)), mn);
    }
  }
}

/// Adds the canonical float steps of super-block s of activation rows t0 ..
/// t0 + NX - 1 to acc[t * 16 + s % 16] (16 rows per vector; kFirst: the
/// lane's first step, onto +0 without reading it). A_s = sum_j sc_j *
/// (codes . x)_j (+ bias): the integer of the canonical step, exact (int32
/// arithmetic, any order), then the float steps in the canonical order.
template <DType T, int NX, bool kFirst>
__attribute__((always_inline)) inline void TileSuperBlock(const KTile& tl, int64_t s,
                                                          const KActBlock* const* rows,
                                                          const float* const* scales,
                                                          __m512* acc) {
  constexpr int kSub = TileSubBlock<T>();
  constexpr int kScales = 256 / kSub;  // scales per super-block
  constexpr int kGroups = kSub / 4;    // 4-code groups per scale
  constexpr bool kMins = kquant_impl::HasMins<T>();
  constexpr bool kBiased = TileTakesBiasedActs(T);
  const KActBlock* xs[NX];
#pragma GCC unroll 8
  for (int t = 0; t < NX; ++t) xs[t] = rows[t] + s;
  __m512i a[NX];
  const __m512i start = kBiased ? _mm512_load_si512(tl.bias) : _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int t = 0; t < NX; ++t) a[t] = start;
  // Not unrolled further: the fully unrolled super-block spilled
  // registers (8 % slower on Zen 4; two interleaved scales gained nothing).
#pragma GCC unroll 2
  for (int j = 0; j < kScales; ++j) {
    __m512i isum[NX];
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < kGroups; ++i) {
      const int g = j * kGroups + i;
      const __m512i wq = _mm512_load_si512(tl.q[g]);
#pragma GCC unroll 8
      for (int t = 0; t < NX; ++t) {
        const __m512i xq = _mm512_set1_epi32(Load32(xs[t]->qs + 4 * g));
        // Biased: unsigned activations against signed weights.
        isum[t] = kBiased ? _mm512_dpbusd_epi32(isum[t], xq, wq)
                          : _mm512_dpbusd_epi32(isum[t], wq, xq);
      }
    }
    const __m512i sc = _mm512_load_si512(tl.sc[j * (kSub / 16)]);
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) a[t] = _mm512_add_epi32(a[t], _mm512_mullo_epi32(isum[t], sc));
  }
  const int lane = static_cast<int>(s % kKGroupBlocks);
  const __m512 dw = _mm512_load_ps(tl.d);
#pragma GCC unroll 8
  for (int t = 0; t < NX; ++t) {
    const __m512 dx = _mm512_set1_ps(scales[t][s]);
    __m512& l = acc[t * kKGroupBlocks + lane];
    l = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(a[t]),
                        kFirst ? _mm512_setzero_ps() : l);
  }
  if constexpr (kMins) {
    __m512i b[NX];
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) b[t] = _mm512_setzero_si512();
    AddSumsTimesMn<NX>(tl, xs, b);
    const __m512 dm = _mm512_load_ps(tl.dmin);
#pragma GCC unroll 8
    for (int t = 0; t < NX; ++t) {
      const __m512 dx = _mm512_set1_ps(scales[t][s]);
      const __m512 m = _mm512_castsi512_ps(_mm512_xor_si512(
          _mm512_castps_si512(_mm512_mul_ps(dm, dx)), _mm512_set1_epi32(INT32_MIN)));
      __m512& l = acc[t * kKGroupBlocks + lane];
      l = _mm512_fmadd_ps(m, _mm512_cvtepi32_ps(b[t]), l);
    }
  }
}

/// Every super-block's float steps of activation rows t0 .. t0 + NX - 1 into
/// acc[t * 16 + lane]: the first 16 write their lanes, the rest add to them;
/// lanes no super-block reaches (fewer than 16) are set to +0.
template <DType T, int NX>
void TileRowsT(const KTile* w, int64_t superblocks, const KActs& x, int64_t t0, __m512* acc) {
  // The rows' addresses once, in locals: stores through __m512* may alias
  // anything, so fields of `x` would be read again after every one.
  const KActBlock* rows[NX];
  const float* scales[NX];
  for (int t = 0; t < NX; ++t) {
    rows[t] = x.Row(t0 + t);
    scales[t] = x.Scales(t0 + t);
  }
  const int64_t first = superblocks < kKGroupBlocks ? superblocks : kKGroupBlocks;
  for (int64_t s = 0; s < first; ++s) TileSuperBlock<T, NX, true>(w[s], s, rows, scales, acc);
  for (int t = 0; t < NX; ++t) {
    for (int64_t lane = first; lane < kKGroupBlocks; ++lane) {
      acc[t * kKGroupBlocks + lane] = _mm512_setzero_ps();
    }
  }
  for (int64_t s = first; s < superblocks; ++s) {
    TileSuperBlock<T, NX, false>(w[s], s, rows, scales, acc);
  }
}

/// The fixed lane tree of cpu_backend.h over 16 accumulators (one per lane),
/// vertically: each of the 16 results is one row's canonical total.
inline __m512 TileReduce(const __m512* l) {
  __m512 s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = _mm512_add_ps(l[i], l[i + 8]);
  for (int i = 0; i < 4; ++i) s4[i] = _mm512_add_ps(s8[i], s8[i + 4]);
  return _mm512_add_ps(_mm512_add_ps(s4[0], s4[2]), _mm512_add_ps(s4[1], s4[3]));
}

template <DType T, int NX>
void TileBlockT(const KTile* w, int nw, int64_t superblocks, const KActs& x, int64_t t0, float* y,
                int64_t ldy) {
  alignas(64) __m512 acc[NX * kKGroupBlocks];
  TileRowsT<T, NX>(w, superblocks, x, t0, acc);
  const __mmask16 keep = static_cast<__mmask16>((1u << nw) - 1);
  for (int t = 0; t < NX; ++t) {
    _mm512_mask_storeu_ps(y + (t0 + t) * ldy, keep, TileReduce(acc + t * kKGroupBlocks));
  }
}

template <DType T>
void DotTileT(const KTile* w, int nw, int64_t superblocks, const KActs& x, int64_t nx, float* y,
              int64_t ldy) {
  int64_t t = 0;
  for (; t + 8 <= nx; t += 8) TileBlockT<T, 8>(w, nw, superblocks, x, t, y, ldy);
  if (t + 4 <= nx) {
    TileBlockT<T, 4>(w, nw, superblocks, x, t, y, ldy);
    t += 4;
  }
  switch (nx - t) {
    case 0:
      break;
    case 1:
      TileBlockT<T, 1>(w, nw, superblocks, x, t, y, ldy);
      break;
    case 2:
      TileBlockT<T, 2>(w, nw, superblocks, x, t, y, ldy);
      break;
    default:
      TileBlockT<T, 3>(w, nw, superblocks, x, t, y, ldy);
      break;
  }
}

template <class K>
void PackTile(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
              KTile* out) {
  kquant_impl::KDispatch(type, [&](auto tag) {
    PackTileT<K, decltype(tag)::value>(w, row_bytes, nw, superblocks, out);
  });
}

/// InterleaveKRows, super-block by super-block through InterleaveBlock16.
inline void InterleaveRows(DType type, const uint8_t* rows, size_t row_bytes, uint8_t* group) {
  kquant_impl::KDispatch(type, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    constexpr int64_t kBytes = kquant_impl::BlockBytes<T>();
    const int64_t superblocks = static_cast<int64_t>(row_bytes) / kBytes;
    for (int64_t s = 0; s < superblocks; ++s) {
      InterleaveBlock16<T>(rows + s * kBytes, row_bytes, group + s * kKTileRows * kBytes);
    }
  });
}

inline void DotTile(DType type, const KTile* w, int nw, int64_t superblocks, const KActs& x,
                    int64_t nx, float* y, int64_t ldy) {
  kquant_impl::KDispatch(
      type, [&](auto tag) { DotTileT<decltype(tag)::value>(w, nw, superblocks, x, nx, y, ldy); });
}

}  // namespace
}  // namespace odmoe
