// The ISA-generic bodies of the quantized MatMul kernels (internal).
//
// Included by cpu_kernels_impl.h. The ISA's vector type `V` (see there) also
// provides the integer side of the canonical quantized dot (cpu_backend.h):
//
//   using IVec = ...;                        // 16 int32 lanes, one per block
//   static Vec Mul(const Vec& a, const Vec& b);
//   static Vec ToFloat(const IVec& v);       // exact: |sum| < 2^24
//   static Vec IntsToFloat(const int32_t* p);  // 16 ints, exactly
//   template <DType T, int kOffset> static Vec GroupHalves(const uint8_t* blocks);
//   template <DType T> static Vec E8M0Scales(const uint8_t* blocks);  // E8M0Half(byte 0)
//   template <DType T> static IVec GroupDot(const uint8_t* blocks, const QActGroup& x);
//   template <DType T> static void PackCodes(const uint8_t* blocks, QWeightGroup* out);
//   template <DType T, int NX>
//   static void PackedDots(const QWeightGroup& w, const QActGroup* const* x, IVec* sums);
//
// `blocks` points at 16 consecutive stored blocks of a weight row.
// GroupHalves decodes the f16 at byte kOffset of each block. GroupDot and
// PackedDots return the exact integer block sums sum_i qw_i * qx_i (lane j:
// block j of the group; qw_i the signed code of cpu_backend.h); how an ISA
// gets them (sign tricks, lookup tables, offsets corrected with
// QActGroup::sum) is its own choice, the integers are the same. PackCodes
// writes the codes of a QWeightGroup in the ISA's own encoding. The float
// step below is shared, so every ISA rounds identically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>

#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_qdot.h"
#include "tensor/dtype.h"

namespace odmoe::cpu_impl {

template <DType T>
constexpr int64_t QBlockBytes() {
  return QLayoutOf(T).bytes;
}
/// Q4_1 / Q5_1: w = d * q + m, the second update of the float step.
template <DType T>
constexpr bool QHasMin() {
  return QLayoutOf(T).m >= 0;
}

/// The 16 block scales of a group (lane j: block j), exactly.
template <class V, DType T>
typename V::Vec QGroupScales(const uint8_t* blocks) {
  if constexpr (QLayoutOf(T).e8m0) {
    return V::template E8M0Scales<T>(blocks);
  } else {
    return V::template GroupHalves<T, 0>(blocks);
  }
}

/// `count` (< 16) stored blocks copied to a zero-filled group: the zero
/// blocks have scale 0 and contribute fma(0, 0, lane) = lane (MXFP4's zero
/// exponent is a tiny scale, but its codes 0 give 0 in every sum).
template <DType T>
struct PaddedGroup {
  alignas(64) uint8_t bytes[kQGroupBlocks * kQ8_0BlockBytes];
  PaddedGroup(const uint8_t* blocks, int64_t count) {
    std::memset(bytes, 0, sizeof(bytes));
    std::memcpy(bytes, blocks, static_cast<size_t>(count * QBlockBytes<T>()));
  }
};

/// The canonical float step of one group: lane j = fma(dw_j * dx_j,
/// (float)isum_j, lane j), then for the types with mins lane j =
/// fma(mw_j * dx_j, (float)sx_j, lane j).
template <class V, DType T>
typename V::Vec QAccumulate(const typename V::Vec& dw, const typename V::Vec& mw,
                            const QActGroup& x, const typename V::IVec& sums,
                            const typename V::Vec& acc) {
  const typename V::Vec dx = V::Load16(x.d);
  typename V::Vec r = V::Fma(V::Mul(dw, dx), V::ToFloat(sums), acc);
  if constexpr (QHasMin<T>()) r = V::Fma(V::Mul(mw, dx), V::IntsToFloat(x.sum), r);
  return r;
}

/// One stored group of 16 blocks against one activation group.
template <class V, DType T>
typename V::Vec QGroupStep(const uint8_t* blocks, const QActGroup& x, const typename V::Vec& acc) {
  typename V::Vec mw = V::Zero();
  if constexpr (QHasMin<T>()) mw = V::template GroupHalves<T, QLayoutOf(T).m>(blocks);
  return QAccumulate<V, T>(QGroupScales<V, T>(blocks), mw, x, V::template GroupDot<T>(blocks, x),
                           acc);
}

/// Bytes ahead of the current group that the decode kernel prefetches.
inline constexpr int64_t kQPrefetchBytes = 2048;

/// One activation row against one stored weight row. The rows of a block
/// are consecutive in memory and are read one after the other: a single
/// sequential stream, which the hardware prefetchers follow far better than
/// several short ones (a prefetch past the end never faults).
template <class V, DType T>
float QDotRowOne(const uint8_t* w, int64_t blocks, const QActGroup* x) {
  constexpr int64_t kGroupBytes = kQGroupBlocks * QBlockBytes<T>();
  typename V::Vec acc = V::Zero();
  const int64_t full = blocks / kQGroupBlocks;
  for (int64_t g = 0; g < full; ++g) {
    const uint8_t* b = w + g * kGroupBytes;
    for (int64_t off = 0; off < kGroupBytes; off += 64)
      __builtin_prefetch(b + kQPrefetchBytes + off);
    acc = QGroupStep<V, T>(b, x[g], acc);
  }
  if (full * kQGroupBlocks < blocks) {
    const PaddedGroup<T> pad(w + full * kGroupBytes, blocks - full * kQGroupBlocks);
    acc = QGroupStep<V, T>(pad.bytes, x[full], acc);
  }
  return V::Reduce(acc);
}

/// One activation row against NW long stored weight rows, read as NW
/// interleaved streams (long rows keep every stream long; more streams in
/// flight reach more of the memory's bandwidth). Same result per row as
/// QDotRowOne.
template <class V, DType T, int NW>
void QDotRowsInterleaved(const uint8_t* w, size_t row_bytes, int64_t blocks, const QActGroup* x,
                         float* y, int64_t ldy) {
  using Vec = typename V::Vec;
  constexpr int64_t kGroupBytes = kQGroupBlocks * QBlockBytes<T>();
  constexpr int64_t kAhead = 2 * kGroupBytes;  // per stream
  Vec acc[NW];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) acc[r] = V::Zero();
  const int64_t full = blocks / kQGroupBlocks;
  for (int64_t g = 0; g < full; ++g) {
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      const uint8_t* b = w + r * row_bytes + g * kGroupBytes;
      for (int64_t off = 0; off < kGroupBytes; off += 64) __builtin_prefetch(b + kAhead + off);
      acc[r] = QGroupStep<V, T>(b, x[g], acc[r]);
    }
  }
  for (int r = 0; r < NW; ++r) {
    if (full * kQGroupBlocks < blocks) {
      const PaddedGroup<T> pad(w + r * row_bytes + full * kGroupBytes,
                               blocks - full * kQGroupBlocks);
      acc[r] = QGroupStep<V, T>(pad.bytes, x[full], acc[r]);
    }
    y[r * ldy] = V::Reduce(acc[r]);
  }
}

/// Rows from this many bytes on are read as 4 interleaved streams (except
/// where CpuReadsOneStreamBest).
inline constexpr size_t kQInterleaveRowBytes = 8192;

template <class V, DType T>
void QDotRowsT(const uint8_t* w, size_t row_bytes, int nw, int64_t blocks, const QActs& x,
               int64_t nx, float* y, int64_t ldy) {
  const bool streams = nw == 4 && row_bytes >= kQInterleaveRowBytes && !CpuReadsOneStreamBest();
  for (int64_t t = 0; t < nx; ++t) {
    if (streams) {
      QDotRowsInterleaved<V, T, 4>(w, row_bytes, blocks, x.Row(t), y + t * ldy, 1);
      continue;
    }
    for (int r = 0; r < nw; ++r) {
      y[t * ldy + r] = QDotRowOne<V, T>(w + r * row_bytes, blocks, x.Row(t));
    }
  }
}

/// One group unpacked: the ISA's codes, the decoded scales and mins.
template <class V, DType T>
void QPackGroup(const uint8_t* blocks, QWeightGroup* out) {
  V::template PackCodes<T>(blocks, out);
  V::Store16(QGroupScales<V, T>(blocks), out->d);
  if constexpr (QHasMin<T>()) {
    V::Store16(V::template GroupHalves<T, QLayoutOf(T).m>(blocks), out->m);
  }
}

template <class V, DType T>
void QPackRowsT(const uint8_t* w, size_t row_bytes, int nw, int64_t blocks, QWeightGroup* packed) {
  constexpr int64_t kGroupBytes = kQGroupBlocks * QBlockBytes<T>();
  const int64_t groups = QGroups(blocks);
  const int64_t full = blocks / kQGroupBlocks;
  for (int r = 0; r < nw; ++r) {
    const uint8_t* row = w + r * row_bytes;
    QWeightGroup* out = packed + r * groups;
    for (int64_t g = 0; g < full; ++g) QPackGroup<V, T>(row + g * kGroupBytes, out + g);
    if (full < groups) {
      const PaddedGroup<T> pad(row + full * kGroupBytes, blocks - full * kQGroupBlocks);
      QPackGroup<V, T>(pad.bytes, out + full);
    }
  }
}

/// One register tile: NW packed weight rows times NX activation rows.
template <class V, DType T, int NW, int NX>
void QPackedTile(const QWeightGroup* w, int64_t groups, const QActs& x, int64_t t0, float* y,
                 int64_t ldy) {
  using Vec = typename V::Vec;
  using IVec = typename V::IVec;
  Vec acc[NW][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) acc[r][t] = V::Zero();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const QActGroup* xg[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) xg[t] = x.Row(t0 + t) + g;
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      const QWeightGroup& wg = w[r * groups + g];
      IVec sums[NX];
      V::template PackedDots<T, NX>(wg, xg, sums);
      const Vec dw = V::Load16(wg.d);
      const Vec mw = QHasMin<T>() ? V::Load16(wg.m) : V::Zero();
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t)
        acc[r][t] = QAccumulate<V, T>(dw, mw, *xg[t], sums[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) y[(t0 + t) * ldy + r] = V::Reduce(acc[r][t]);
  }
}

template <class V, DType T, int NW>
void QPackedRows(const QWeightGroup* w, int64_t groups, const QActs& x, int64_t nx, float* y,
                 int64_t ldy) {
  int64_t t = 0;
  for (; t + V::kQTileNX <= nx; t += V::kQTileNX) {
    QPackedTile<V, T, NW, V::kQTileNX>(w, groups, x, t, y, ldy);
  }
  switch (nx - t) {  // the last partial group of activation rows
    case 0:
      return;
    case 1:
      return QPackedTile<V, T, NW, 1>(w, groups, x, t, y, ldy);
    case 2:
      return QPackedTile<V, T, NW, 2>(w, groups, x, t, y, ldy);
    default:
      return QPackedTile<V, T, NW, 3>(w, groups, x, t, y, ldy);
  }
}

template <class V, DType T>
void QDotPackedT(const QWeightGroup* packed, int nw, int64_t groups, const QActs& x, int64_t nx,
                 float* y, int64_t ldy) {
  switch (nw) {
    case 1:
      return QPackedRows<V, T, 1>(packed, groups, x, nx, y, ldy);
    case 2:
      return QPackedRows<V, T, 2>(packed, groups, x, nx, y, ldy);
    case 3:
      return QPackedRows<V, T, 3>(packed, groups, x, nx, y, ldy);
    default:
      return QPackedRows<V, T, 4>(packed, groups, x, nx, y, ldy);
  }
}

/// The three entry points of the kernel table, dispatched by type through
/// one function table per entry point (kQDotTypes order).
template <class V, class Seq = std::make_index_sequence<std::size(kQDotTypes)>>
struct QDispatch;

template <class V, size_t... I>
struct QDispatch<V, std::index_sequence<I...>> {
  static constexpr decltype(&QDotRowsT<V, DType::kQ8_0>) kRows[] = {
      &QDotRowsT<V, kQDotTypes[I]>...};
  static constexpr decltype(&QPackRowsT<V, DType::kQ8_0>) kPack[] = {
      &QPackRowsT<V, kQDotTypes[I]>...};
  static constexpr decltype(&QDotPackedT<V, DType::kQ8_0>) kPacked[] = {
      &QDotPackedT<V, kQDotTypes[I]>...};
};

template <class V>
void QDotRows(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t blocks,
              const QActs& x, int64_t nx, float* y, int64_t ldy) {
  QDispatch<V>::kRows[QDotTypeIndex(type)](w, row_bytes, nw, blocks, x, nx, y, ldy);
}

template <class V>
void QPackRows(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t blocks,
               QWeightGroup* packed) {
  QDispatch<V>::kPack[QDotTypeIndex(type)](w, row_bytes, nw, blocks, packed);
}

template <class V>
void QDotPacked(DType type, const QWeightGroup* packed, int nw, int64_t groups, const QActs& x,
                int64_t nx, float* y, int64_t ldy) {
  QDispatch<V>::kPacked[QDotTypeIndex(type)](packed, nw, groups, x, nx, y, ldy);
}

}  // namespace odmoe::cpu_impl
