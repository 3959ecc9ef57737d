// Which rows the CUDA backend holds quantized already (plain C++: the
// bookkeeping is tested without a GPU).
//
// A decode step normalizes a row and multiplies it by several quantized
// weights: q, k and v after the attention norm, the picked experts' gate and
// up (and a shared expert) after the FFN norm, the head after the output
// norm. Each product quantizes its activations first (Q8_K for the K family,
// Q8_0 for the block32 types), one small kernel each. Instead, a norm of at
// most kMaxRows rows of a multiple of 256 floats writes its output's Q8_K
// and Q8_0 forms too (cuda_kernels.h NormQuantOut: the quantize kernels'
// bits), into one buffer laid out as below, and this record says whose they
// are. A product whose x is exactly those rows (same address, rows and
// columns) reads them instead of quantizing. The record is dropped by every
// op that may write device memory (CudaBackend::Enter), and by a product,
// RouterTopK or a copy from the host only when one of its outputs overlaps
// the normed rows; so a lookup never returns the forms of rows that changed
// since, as long as every write to the backend's activations goes through
// its ops or CopyToBackend (the only other writer, a slot device's copy
// stream, writes expert weights, never a norm's output).
//
//   NormQuantCache cache;
//   if (NormQuantCache::Fits(y.rows, y.cols)) {   // buffer of Bytes(rows, cols)
//     ... norm kernel with NormQuantOut at base + 0 and base + Q8_0Offset(..) ...
//     cache.Filled(y.data, y.rows, y.cols);
//   }
//   if (std::optional<size_t> at = cache.Find(plan.path, x)) xq = base + *at;
//   cache.DropIfWrites(y);                                          // outputs
//   cache.Drop();                                                   // any other op
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "backend/backend.h"
#include "matmul_plan.h"

namespace odmoe {

class NormQuantCache {
 public:
  /// Norms of up to this many rows quantize their output (decode and small
  /// batches; a prefill's products quantize their own rows, where one block
  /// per row would serialize the work).
  static constexpr int64_t kMaxRows = 8;

  /// Whether a norm output of rows x cols is kept quantized.
  static bool Fits(int64_t rows, int64_t cols);
  /// Offset of the Q8_0 form (codes, then scales, as the products' scratch)
  /// after the Q8_K form at 0; a multiple of 16.
  static size_t Q8_0Offset(int64_t rows, int64_t cols);
  /// Bytes of both forms.
  static size_t Bytes(int64_t rows, int64_t cols);

  /// The buffer now holds the quantized forms of these rows.
  void Filled(const float* rows_data, int64_t rows, int64_t cols);
  /// Forget them.
  void Drop() { valid_ = false; }
  /// Forget them when [p, p + bytes) overlaps the rows.
  void DropIfWrites(const void* p, size_t bytes);
  void DropIfWrites(Mat m) {
    DropIfWrites(m.data, static_cast<size_t>(m.rows * m.cols) * sizeof(float));
  }
  /// The offset of x's quantized form for a product on `path` (kQuantized:
  /// Q8_0, kQuantizedK: Q8_K), when x is exactly the rows kept; counts hits.
  std::optional<size_t> Find(MatMulPath path, ConstMat x);

  bool valid() const { return valid_; }
  /// How many products read a kept form instead of quantizing.
  uint64_t hits() const { return hits_; }

 private:
  const float* data_ = nullptr;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  bool valid_ = false;
  uint64_t hits_ = 0;
};

}  // namespace odmoe
