// The ISA-generic bodies of the kernels in cpu_kernels.h (internal).
//
// Included by each cpu_kernels_<isa>.cpp after it defines a vector type `V`
// with 16 float lanes that implements the canonical order's primitives:
//
//   struct V {
//     using Vec = ...;                                  // 16 float lanes
//     static constexpr int kTileNW, kTileNX;            // register tile
//     static Vec Zero();
//     static Vec Broadcast(float a);
//     static Vec Load16(const float* p);
//     static void Store16(const Vec& v, float* p);
//     static Vec Fma(const Vec& w, const Vec& x, const Vec& acc);  // per lane
//     static float Reduce(const Vec& acc);             // the fixed lane tree
//     template <DType T> static void LoadW32(const uint8_t* row, int64_t blk, Vec& a, Vec& b);
//     static Vec Silu(const Vec& x);                   // cpu_math::Silu per lane
//     static constexpr int kQTileNX;                   // quantized register tile
//     ... and the integer primitives listed in cpu_qdot_impl.h
//   };
//
// LoadW32 dequantizes elements [32 * blk, 32 * blk + 32) of a row exactly
// (a: the first 16, b: the next 16). Everything here is a template on V, so
// each ISA's translation unit instantiates its own copy under its own target.
// The `#pragma GCC unroll` lines unroll the loops over the small accumulator
// arrays completely, so that they stay in registers (-O2 alone would not).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu_kernels.h"
#include "cpu_math.h"
#include "cpu_qdot_impl.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

// Forces inlining of the small vector primitives, whose array arguments
// (register slices) would otherwise go through the stack.
#define ODMOE_CPU_INLINE __attribute__((always_inline)) inline

namespace odmoe::cpu_impl {

/// Feeds the last `count` (< 32) elements, zero-padded to a multiple of 16,
/// into `acc`: the canonical treatment of a tail.
template <class V>
typename V::Vec FmaPaddedTail(const float* w, const float* x, int64_t count, typename V::Vec acc) {
  alignas(64) float wb[32] = {};
  alignas(64) float xb[32] = {};
  std::memcpy(wb, w, static_cast<size_t>(count) * sizeof(float));
  std::memcpy(xb, x, static_cast<size_t>(count) * sizeof(float));
  for (int64_t s = 0; s < count; s += 16) acc = V::Fma(V::Load16(wb + s), V::Load16(xb + s), acc);
  return acc;
}

template <class V>
float DotF32(const float* a, const float* b, int64_t n) {
  typename V::Vec acc = V::Zero();
  const int64_t n16 = n / 16 * 16;
  for (int64_t i = 0; i < n16; i += 16) acc = V::Fma(V::Load16(a + i), V::Load16(b + i), acc);
  if (n16 < n) acc = FmaPaddedTail<V>(a + n16, b + n16, n - n16, acc);
  return V::Reduce(acc);
}

template <class V, DType T, int NW>
void DotRows(const uint8_t* w, size_t row_bytes, const float* x, int64_t k, float* y) {
  using Vec = typename V::Vec;
  Vec acc[NW];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) acc[r] = V::Zero();
  const int64_t nblk = k / 32;
  for (int64_t b = 0; b < nblk; ++b) {
    const Vec x0 = V::Load16(x + 32 * b);
    const Vec x1 = V::Load16(x + 32 * b + 16);
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      Vec w0, w1;
      V::template LoadW32<T>(w + r * row_bytes, b, w0, w1);
      acc[r] = V::Fma(w0, x0, acc[r]);
      acc[r] = V::Fma(w1, x1, acc[r]);
    }
  }
  const int64_t done = nblk * 32;
  if (done < k) {  // only unquantized types have partial blocks
    alignas(64) float wt[32];
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      DequantizeRow(T, w + r * row_bytes + RowBytes(T, done), wt, k - done);
      acc[r] = FmaPaddedTail<V>(wt, x + done, k - done, acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) y[r] = V::Reduce(acc[r]);
}

template <class V, DType T>
void DotRowsN(const uint8_t* w, size_t row_bytes, int nw, const float* x, int64_t k, float* y) {
  switch (nw) {
    case 1:
      return DotRows<V, T, 1>(w, row_bytes, x, k, y);
    case 2:
      return DotRows<V, T, 2>(w, row_bytes, x, k, y);
    case 3:
      return DotRows<V, T, 3>(w, row_bytes, x, k, y);
    default:
      return DotRows<V, T, 4>(w, row_bytes, x, k, y);
  }
}

template <class V>
void DotRowsAny(DType type, const uint8_t* w, size_t row_bytes, int nw, const float* x, int64_t k,
                float* y) {
  switch (type) {
    case DType::kF32:
      return DotRowsN<V, DType::kF32>(w, row_bytes, nw, x, k, y);
    case DType::kF16:
      return DotRowsN<V, DType::kF16>(w, row_bytes, nw, x, k, y);
    case DType::kBF16:
      return DotRowsN<V, DType::kBF16>(w, row_bytes, nw, x, k, y);
    case DType::kQ8_0:
      return DotRowsN<V, DType::kQ8_0>(w, row_bytes, nw, x, k, y);
    case DType::kQ4_0:
      return DotRowsN<V, DType::kQ4_0>(w, row_bytes, nw, x, k, y);
    default:  // MatMul sends the other quantized types to the qdot kernels
      return;
  }
}

/// One register tile: NW weight rows times NX activation rows.
template <class V, int NW, int NX>
void Tile(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y,
          int64_t ldy) {
  using Vec = typename V::Vec;
  Vec acc[NW][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) acc[r][t] = V::Zero();
  }
  const int64_t k16 = k / 16 * 16;
  for (int64_t i = 0; i < k16; i += 16) {
    Vec xv[NX];
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) xv[t] = V::Load16(x + t * ldx + i);
#pragma GCC unroll 4
    for (int r = 0; r < NW; ++r) {
      const Vec wv = V::Load16(w + r * ldw + i);
#pragma GCC unroll 4
      for (int t = 0; t < NX; ++t) acc[r][t] = V::Fma(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NW; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      if (k16 < k)
        acc[r][t] = FmaPaddedTail<V>(w + r * ldw + k16, x + t * ldx + k16, k - k16, acc[r][t]);
      y[t * ldy + r] = V::Reduce(acc[r][t]);
    }
  }
}

template <class V, int NW>
void TileRows(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t nx, int64_t k,
              float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + V::kTileNX <= nx; t += V::kTileNX) {
    Tile<V, NW, V::kTileNX>(w, ldw, x + t * ldx, ldx, k, y + t * ldy, ldy);
  }
  const float* xt = x + t * ldx;
  float* yt = y + t * ldy;
  switch (nx - t) {  // the last partial group of activation rows
    case 0:
      return;
    case 1:
      return Tile<V, NW, 1>(w, ldw, xt, ldx, k, yt, ldy);
    case 2:
      return Tile<V, NW, 2>(w, ldw, xt, ldx, k, yt, ldy);
    default:
      return Tile<V, NW, 3>(w, ldw, xt, ldx, k, yt, ldy);
  }
}

template <class V>
void TileF32(const float* w, int64_t ldw, int nw, const float* x, int64_t ldx, int64_t nx,
             int64_t k, float* y, int64_t ldy) {
  for (int r = 0; r < nw; r += V::kTileNW) {
    const int rows = std::min(nw - r, V::kTileNW);
    const float* wr = w + r * ldw;
    float* yr = y + r;
    if (rows == V::kTileNW) {
      TileRows<V, V::kTileNW>(wr, ldw, x, ldx, nx, k, yr, ldy);
    } else if (rows == 1) {
      TileRows<V, 1>(wr, ldw, x, ldx, nx, k, yr, ldy);
    } else {  // 2 or 3 rows left of a 4-row tile
      TileRows<V, 1>(wr, ldw, x, ldx, nx, k, yr, ldy);
      TileF32<V>(wr + ldw, ldw, rows - 1, x, ldx, nx, k, yr + 1, ldy);
    }
  }
}

template <class V>
void DequantRow(DType type, const uint8_t* src, float* dst, int64_t k) {
  const int64_t nblk = k / 32;
  auto run = [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    for (int64_t b = 0; b < nblk; ++b) {
      typename V::Vec a, c;
      V::template LoadW32<T>(src, b, a, c);
      V::Store16(a, dst + 32 * b);
      V::Store16(c, dst + 32 * b + 16);
    }
  };
  switch (type) {
    case DType::kF32:
      run(std::integral_constant<DType, DType::kF32>());
      break;
    case DType::kF16:
      run(std::integral_constant<DType, DType::kF16>());
      break;
    case DType::kBF16:
      run(std::integral_constant<DType, DType::kBF16>());
      break;
    case DType::kQ8_0:
      run(std::integral_constant<DType, DType::kQ8_0>());
      break;
    case DType::kQ4_0:
      run(std::integral_constant<DType, DType::kQ4_0>());
      break;
    default:  // the other quantized types: the scalar reference itself
      return DequantizeRow(type, src, dst, k);
  }
  const int64_t done = nblk * 32;
  if (done < k) DequantizeRow(type, src + RowBytes(type, done), dst + done, k - done);
}

template <class V>
void Axpy(float a, const float* x, float* y, int64_t n) {
  typename V::Vec av = V::Broadcast(a);
  const int64_t n16 = n / 16 * 16;
  for (int64_t i = 0; i < n16; i += 16)
    V::Store16(V::Fma(av, V::Load16(x + i), V::Load16(y + i)), y + i);
  for (int64_t i = n16; i < n; ++i) y[i] = __builtin_fmaf(a, x[i], y[i]);
}

template <class V>
void SwiGluRow(const float* g, const float* u, float* out, int64_t n) {
  const int64_t n16 = n / 16 * 16;
  for (int64_t i = 0; i < n16; i += 16) {
    V::Store16(V::Mul(V::Silu(V::Load16(g + i)), V::Load16(u + i)), out + i);
  }
  for (int64_t i = n16; i < n; ++i) out[i] = cpu_math::Silu(g[i]) * u[i];
}

template <class V>
CpuKernels MakeKernels(CpuIsa isa) {
  static_assert(V::kQTileNX >= 1 && V::kQTileNX <= 4);
  return CpuKernels{isa,      &DotF32<V>,    &DotRowsAny<V>, &TileF32<V>,   &DequantRow<V>,
                    &Axpy<V>, &SwiGluRow<V>, &QDotRows<V>,   &QPackRows<V>, &QDotPacked<V>};
}

}  // namespace odmoe::cpu_impl
