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
#include "cpu_qdot.h"
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
  /// (MatMul uses it for F16 and BF16 weights; block32 types go through the
  /// quantized kernels below.)
  void (*dot_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, const float* x,
                   int64_t k, float* y);

  /// y[t * ldy + r] = canonical dot of (w + r * ldw, x + t * ldx), both k
  /// floats long, for r < nw (1..4) and every t < nx.
  void (*tile_f32)(const float* w, int64_t ldw, int nw, const float* x, int64_t ldx, int64_t nx,
                   int64_t k, float* y, int64_t ldy);

  /// Exact conversion of k elements of `type` to float (k a whole number of
  /// blocks): bitwise DequantizeRow's result (types without SIMD code of
  /// their own call it).
  void (*dequant_row)(DType type, const uint8_t* src, float* dst, int64_t k);

  /// y[i] = fma(a, x[i], y[i]) for i < n (one rounding per element).
  void (*axpy)(float a, const float* x, float* y, int64_t n);

  /// out[i] = cpu_math::Silu(g[i]) * u[i] for i < n: the SIMD levels
  /// evaluate cpu_math::ExpF lane by lane with the same operations in the
  /// same order, so the bits are the scalar ones.
  void (*swiglu)(const float* g, const float* u, float* out, int64_t n);

  // ---- Quantized MatMul (block32 weights: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
  // IQ4_NL, MXFP4; layouts in cpu_qdot.h) ----
  /// y[t * ldy + r] = canonical quantized dot (cpu_backend.h) of weight row r
  /// with activation row t of x, for r < nw (1..4) and t < nx. Row r starts
  /// at w + r * row_bytes and holds `blocks` blocks of `type`; each x row
  /// holds QGroups(blocks) groups. Reads the weight blocks as stored.
  void (*qdot_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t blocks,
                    const QActs& x, int64_t nx, float* y, int64_t ldy);

  /// Unpacks nw (1..4) weight rows as qdot_rows reads them into QGroups(blocks)
  /// groups per row: row r to packed + r * QGroups(blocks).
  void (*qpack_rows)(DType type, const uint8_t* w, size_t row_bytes, int nw, int64_t blocks,
                     QWeightGroup* packed);

  /// qdot_rows on rows packed by this table's qpack_rows (bitwise the same
  /// results); each row holds `groups` groups, row r at packed + r * groups.
  /// The weight groups are reused from registers across activation rows.
  void (*qdot_packed)(DType type, const QWeightGroup* packed, int nw, int64_t groups,
                      const QActs& x, int64_t nx, float* y, int64_t ldy);

  /// Optional: QuantizeRow(DType::kQ8_0) of one activation row of `blocks`
  /// blocks with SIMD, straight into its QGroups(blocks) QActGroups (the
  /// padding blocks zero): the bits of the scalar quantizer and layout.
  void (*quantize_q8_0_acts)(const float* x, int64_t blocks, QActGroup* out) = nullptr;
};

/// The table of `isa`; the caller makes sure the CPU supports it.
const CpuKernels& CpuKernelsFor(CpuIsa isa);

// One table per ISA, defined in cpu_kernels_<isa>.cpp. The SIMD ones return
// null in builds for other architectures.
const CpuKernels* CpuKernelsScalar();
const CpuKernels* CpuKernelsAvx2();
const CpuKernels* CpuKernelsAvx512();
const CpuKernels* CpuKernelsAvx512Vnni();

}  // namespace odmoe
