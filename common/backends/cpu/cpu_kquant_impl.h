// The ISA-generic bodies of the K-family MatMul kernels (internal).
//
// Included by each cpu_kquant_<isa>.cpp after it defines its ISA type `K`:
//
//   struct K {
//     using Vec = ...;                                   // 16 f32 lanes
//     static constexpr int kTileNX;                      // prefill register tile
//     static Vec Zero();
//     static Vec Load16(const float* p);
//     static Vec Mul(const Vec& a, const Vec& b);        // one rounding per lane
//     static Vec Neg(const Vec& a);                      // exact sign flip
//     static Vec Fma(const Vec& a, const Vec& b, const Vec& acc);
//     static Vec ToFloat(const int32_t* s);              // 16 ints, round to nearest
//     static float Reduce(const Vec& acc);               // the fixed lane tree
//     using IPart = ...;                                 // int32 partial sums
//     static void Sum16(const IPart* parts, int32_t* out);  // 16 lane totals
//     template <DType T> static void Unpack(const uint8_t* block, KUnpacked* out);
//     template <DType T, int NX>
//     static void Dot(const KUnpacked& w, const KActBlock* const* x, IPart* a, IPart* b);
//   };
//
// Unpack writes the bytes CpuKQuantUnpackReference defines; Dot returns
// partial sums whose totals are the exact A_s (a[t]) and, for the types with
// mins, B_s (b[t]) of the unpacked super-block w with the activation
// super-blocks x[t], t < NX (cpu_kquant.h); Sum16 adds up the partials of a
// whole group at once (integers: the order does not matter).
// The float step below is shared, so every ISA rounds identically.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu_kquant.h"
#include "tensor/dtype.h"

namespace odmoe::kquant_impl {

template <DType T>
constexpr int BlockBytes() {
  switch (T) {
    case DType::kQ2_K:
      return sizeof(BlockQ2K);
    case DType::kQ3_K:
      return sizeof(BlockQ3K);
    case DType::kQ4_K:
      return sizeof(BlockQ4K);
    case DType::kQ5_K:
      return sizeof(BlockQ5K);
    case DType::kQ6_K:
      return sizeof(BlockQ6K);
    default:
      return sizeof(BlockIq4Xs);
  }
}

/// Q2_K, Q4_K, Q5_K: the second update with dmin and B_s.
template <DType T>
constexpr bool HasMins() {
  return T == DType::kQ2_K || T == DType::kQ4_K || T == DType::kQ5_K;
}

/// The integer partial sums and decoded scales of one group of 16
/// super-blocks of one (weight row, activation row) pair; entries past the
/// row's end stay 0.
template <class K>
struct alignas(64) KGroupSums {
  typename K::IPart a[kKGroupBlocks];
  typename K::IPart b[kKGroupBlocks];
  float dw[kKGroupBlocks];
  float dm[kKGroupBlocks];
};

/// The canonical float step of one group: lane s = fma(dw_s * dx_s, A_s,
/// lane s), then for the types with mins fma(-(dmin_s * dx_s), B_s, lane s).
/// Zero entries (past the row's end) leave their lanes as they are.
template <class K, DType T>
typename K::Vec KAccumulate(const KGroupSums<K>& g, const float* dx, typename K::Vec acc) {
  const typename K::Vec x = K::Load16(dx);
  alignas(64) int32_t sums[kKGroupBlocks];
  K::Sum16(g.a, sums);
  acc = K::Fma(K::Mul(K::Load16(g.dw), x), K::ToFloat(sums), acc);
  if constexpr (HasMins<T>()) {
    K::Sum16(g.b, sums);
    acc = K::Fma(K::Neg(K::Mul(K::Load16(g.dm), x)), K::ToFloat(sums), acc);
  }
  return acc;
}

/// Bytes ahead of the current super-block that decode prefetches.
inline constexpr int64_t kKPrefetchBytes = 2048;

/// One activation row against one stored weight row (`superblocks`
/// super-blocks at w): y = the canonical K-family dot.
template <class K, DType T>
float KDotRowStored(const uint8_t* w, int64_t superblocks, const KActBlock* x, const float* dx) {
  constexpr int64_t kBytes = BlockBytes<T>();
  typename K::Vec acc = K::Zero();
  KGroupSums<K> sums;
  KUnpacked u;
  for (int64_t g0 = 0; g0 < superblocks; g0 += kKGroupBlocks) {
    const int n = static_cast<int>(std::min<int64_t>(kKGroupBlocks, superblocks - g0));
    if (n < kKGroupBlocks) std::memset(static_cast<void*>(&sums), 0, sizeof(sums));
    for (int s = 0; s < n; ++s) {
      const KActBlock* xs = x + g0 + s;
      const uint8_t* b = w + (g0 + s) * kBytes;
      for (int64_t off = 0; off < kBytes; off += 64) __builtin_prefetch(b + kKPrefetchBytes + off);
      if constexpr (requires { K::kFusedDecode; }) {
        K::template UnpackScales<T>(b, &u);
        K::template DotStored<T>(b, u, xs, &sums.a[s], &sums.b[s]);
      } else {
        K::template Unpack<T>(b, &u);
        K::template Dot<T, 1>(u, &xs, &sums.a[s], &sums.b[s]);
      }
      sums.dw[s] = u.d;
      sums.dm[s] = u.dmin;
    }
    acc = KAccumulate<K, T>(sums, dx + g0, acc);
  }
  return K::Reduce(acc);
}

/// Row by row: with the codes in registers (KAvx512), reading 4 rows as
/// interleaved streams was measured slower than one row at a time (about 10 %
/// on 4096 x 14336 Q6_K), so decode streams each row on its own.
template <class K, DType T>
void KDotRowsT(const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks, const KActs& x,
               int64_t nx, float* y, int64_t ldy) {
  for (int64_t t = 0; t < nx; ++t) {
    for (int r = 0; r < nw; ++r) {
      y[t * ldy + r] = KDotRowStored<K, T>(w + r * row_bytes, superblocks, x.Row(t), x.Scales(t));
    }
  }
}

template <class K, DType T>
void KUnpackRowsT(const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks, KUnpacked* out) {
  constexpr int64_t kBytes = BlockBytes<T>();
  for (int r = 0; r < nw; ++r) {
    const uint8_t* row = w + r * row_bytes;
    for (int64_t s = 0; s < superblocks; ++s) {
      K::template Unpack<T>(row + s * kBytes, out + r * superblocks + s);
    }
  }
}

/// One register tile: NW unpacked weight rows times NX activation rows.
template <class K, DType T, int NW, int NX>
void KUnpackedTile(const KUnpacked* w, int64_t superblocks, const KActs& x, int64_t t0, float* y,
                   int64_t ldy) {
  using Vec = typename K::Vec;
  Vec acc[NW][NX];
  KGroupSums<K> sums[NW][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) acc[r][t] = K::Zero();
  }
  for (int64_t g0 = 0; g0 < superblocks; g0 += kKGroupBlocks) {
    const int n = static_cast<int>(std::min<int64_t>(kKGroupBlocks, superblocks - g0));
    if (n < kKGroupBlocks) {
      std::memset(static_cast<void*>(sums), 0, sizeof(sums));
    }
    for (int s = 0; s < n; ++s) {
      const KActBlock* xs[NX];
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) xs[t] = x.Row(t0 + t) + g0 + s;
#pragma GCC unroll 4
      for (int r = 0; r < NW; ++r) {
        const KUnpacked& u = w[r * superblocks + g0 + s];
        typename K::IPart a[NX], b[NX];
        K::template Dot<T, NX>(u, xs, a, b);
#pragma GCC unroll 4
        for (int t = 0; t < NX; ++t) {
          sums[r][t].a[s] = a[t];
          sums[r][t].b[s] = b[t];
          sums[r][t].dw[s] = u.d;
          sums[r][t].dm[s] = u.dmin;
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) {
        acc[r][t] = KAccumulate<K, T>(sums[r][t], x.Scales(t0 + t) + g0, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) y[(t0 + t) * ldy + r] = K::Reduce(acc[r][t]);
  }
}

/// Weight rows are taken one at a time (the tile reuses each unpacked weight
/// super-block across NX activation rows; the 4 rows of a block stay in L1/L2).
template <class K, DType T>
void KDotUnpackedT(const KUnpacked* w, int nw, int64_t superblocks, const KActs& x, int64_t nx,
                   float* y, int64_t ldy) {
  for (int r = 0; r < nw; ++r) {
    const KUnpacked* wr = w + r * superblocks;
    float* yr = y + r;
    int64_t t = 0;
    for (; t + K::kTileNX <= nx; t += K::kTileNX) {
      KUnpackedTile<K, T, 1, K::kTileNX>(wr, superblocks, x, t, yr, ldy);
    }
    switch (nx - t) {
      case 0:
        break;
      case 1:
        KUnpackedTile<K, T, 1, 1>(wr, superblocks, x, t, yr, ldy);
        break;
      case 2:
        KUnpackedTile<K, T, 1, 2>(wr, superblocks, x, t, yr, ldy);
        break;
      default:
        KUnpackedTile<K, T, 1, 3>(wr, superblocks, x, t, yr, ldy);
        break;
    }
  }
}

/// Calls f(std::integral_constant<DType, T>) for the K-family type `type`.
template <class F>
void KDispatch(DType type, F&& f) {
  switch (type) {
    case DType::kQ2_K:
      return f(std::integral_constant<DType, DType::kQ2_K>());
    case DType::kQ3_K:
      return f(std::integral_constant<DType, DType::kQ3_K>());
    case DType::kQ4_K:
      return f(std::integral_constant<DType, DType::kQ4_K>());
    case DType::kQ5_K:
      return f(std::integral_constant<DType, DType::kQ5_K>());
    case DType::kQ6_K:
      return f(std::integral_constant<DType, DType::kQ6_K>());
    default:
      return f(std::integral_constant<DType, DType::kIQ4_XS>());
  }
}

template <class K>
void KDotRows(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
              const KActs& x, int64_t nx, float* y, int64_t ldy) {
  KDispatch(type, [&](auto tag) {
    KDotRowsT<K, decltype(tag)::value>(w, row_bytes, nw, superblocks, x, nx, y, ldy);
  });
}

template <class K>
void KUnpackRows(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t superblocks,
                 KUnpacked* out) {
  KDispatch(type, [&](auto tag) {
    KUnpackRowsT<K, decltype(tag)::value>(w, row_bytes, nw, superblocks, out);
  });
}

template <class K>
void KDotUnpacked(DType type, const KUnpacked* w, int nw, int64_t superblocks, const KActs& x,
                  int64_t nx, float* y, int64_t ldy) {
  KDispatch(type, [&](auto tag) {
    KDotUnpackedT<K, decltype(tag)::value>(w, nw, superblocks, x, nx, y, ldy);
  });
}

template <class K>
CpuKQuantKernels MakeKQuantKernels(CpuIsa isa) {
  return CpuKQuantKernels{isa, &KDotRows<K>, &KUnpackRows<K>, &KDotUnpacked<K>};
}

}  // namespace odmoe::kquant_impl
