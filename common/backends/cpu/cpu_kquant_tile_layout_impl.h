// The KTile layout (cpu_kquant.h) as both tile packers write it (internal):
// the row-order packer of cpu_kquant_tile_impl.h and the KInterleave16 one of
// cpu_kquant_interleaved_impl.h give the same bytes through these helpers.
// Included after a target pragma with AVX-512 VNNI.
//
//   t.q[g] = TileCodes<T>(unsigned_codes);  // each of the 64 code groups
//   ... t.sc, t.mn (mins types), t.d, t.dmin ...
//   FinishTile<T>(t);                       // bias (offset types), mn zero
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"
#include "cpu_kquant_impl.h"

namespace odmoe {
namespace {  // NOLINT(build/namespaces): compiled for one target only

/// The unsigned code minus the tile's byte: the code offset of Q3_K and
/// Q6_K (their tiles hold the signed value), 0 for the types with mins
/// (unsigned codes) and IQ4_XS (KUnpacked::q holds its signed values).
template <DType T>
constexpr int TileCodeOffset() {
  switch (T) {
    case DType::kQ3_K:
      return kQ3KCodeOffset;
    case DType::kQ6_K:
      return kQ6KCodeOffset;
    default:
      return 0;
  }
}

/// 64 unsigned codes of the stored type (Q3_K, Q6_K: with their offset) to
/// the tile's bytes: the signed values for the offset types, as they are
/// for the others.
template <DType T>
__attribute__((always_inline)) inline __m512i TileCodes(__m512i codes) {
  constexpr int kOffset = TileCodeOffset<T>();
  if constexpr (kOffset != 0) return _mm512_sub_epi8(codes, _mm512_set1_epi8(kOffset));
  return codes;
}

/// After q, sc, d and dmin are in place: the offset types' bias (-128 *
/// sum_j sc_j * sum_{i in j} w_i per row, exact int32: |bias| <= 128 * 16 *
/// 128 * 16 * 128 = 2^29) and their zero mins.
template <DType T>
__attribute__((always_inline)) inline void FinishTile(KTile& t) {
  if constexpr (TileTakesBiasedActs(T)) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        sum = _mm512_dpbusd_epi32(sum, ones, _mm512_load_si512(t.q[4 * j + i]));
      }
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(sum, _mm512_load_si512(t.sc[j])));
    }
    const __m512i bias = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(acc, 7));
    _mm512_store_si512(t.bias, bias);
    std::memset(t.mn, 0, sizeof(t.mn));
  } else {
    std::memset(t.bias, 0, sizeof(t.bias));
  }
}

}  // namespace
}  // namespace odmoe
