// The per-ISA kernel table of the CPU backend (internal to the backend).
//
// Each SIMD level (cpu_isa.h) fills one CpuKernels table with the same
// functions; the ops in cpu_ops.h only call through it. Every function here
// follows the canonical summation order documented in cpu_backend.h, so all
// tables return bitwise identical results for the same inputs.
//
//   const CpuKernels& k = CpuKernelsFor(CpuIsa::kAvx2);
//   float d = k.dot_f32(a, b, n);
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"
#include "tensor/dtype.h"

namespace odmoe {

/// Lanes of the canonical dot product: element i accumulates into lane i % 16.
inline constexpr int kCpuDotLanes = 16;

struct CpuKernels {
  CpuIsa isa;

  /// Canonical dot product of two float arrays of length n.
  float (*dot_f32)(const float* a, const float* b, int64_t n);

  /// y[r] = canonical dot of (dequantized row r of w, x) for r < nw, nw in
  /// 1..4. Row r starts at w + r * row_bytes and holds k elements of `type`.
  void (*dot_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, const float* x,
                   int64_t k, float* y);

  /// y[t * ldy + r] = canonical dot of (w + r * ldw, x + t * ldx), both k
  /// floats long, for r < nw (1..4) and every t < nx.
  void (*tile_f32)(const float* w, int64_t ldw, int nw, const float* x, int64_t ldx, int64_t nx,
                   int64_t k, float* y, int64_t ldy);

  /// Exact conversion of k elements of `type` to float (k a whole number of
  /// blocks).
  void (*dequant_row)(DType type, const uint8_t* src, float* dst, int64_t k);

  /// y[i] = fma(a, x[i], y[i]) for i < n (one rounding per element).
  void (*axpy)(float a, const float* x, float* y, int64_t n);
};

/// The table of `isa`; the caller makes sure the CPU supports it.
const CpuKernels& CpuKernelsFor(CpuIsa isa);

// One table per ISA, defined in cpu_kernels_<isa>.cpp. The SIMD ones return
// null in builds for other architectures.
const CpuKernels* CpuKernelsScalar();
const CpuKernels* CpuKernelsAvx2();
const CpuKernels* CpuKernelsAvx512();

}  // namespace odmoe
