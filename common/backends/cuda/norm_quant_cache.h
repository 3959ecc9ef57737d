// Which rows the CUDA backend holds quantized already (plain C++: the
// bookkeeping is tested without a GPU).
//
// A decode step normalizes a row and multiplies it by several quantized
// weights: q, k and v after the attention norm, the picked experts' gate and
// up (and a shared expert) after the FFN norm, the head after the output
// norm. Each product quantizes its activations first (Q8_K for the K family,
// Q8_0 for the block32 types), one small kernel each. Instead, a norm of at
// most kMaxRows rows of a multiple of 256 floats writes its output's Q8_K
// and / or Q8_0 forms too (cuda_kernels.h NormQuantOut: the quantize
// kernels' bits; which ones: below), into one buffer laid out as below
// (Q8_K at 0, Q8_0 at Q8_0Offset), and this record says whose they
// are. A product whose x is exactly those rows (same address, rows and
// columns) reads them instead of quantizing. The record is dropped by every
// op that may write device memory (CudaBackend::Enter), and by a product,
// RouterTopK or a copy from the host only when one of its outputs overlaps
// the normed rows; so a lookup never returns the forms of rows that changed
// since, as long as every write to the backend's activations goes through
// its ops or CopyToBackend (the only other writer, a slot device's copy
// stream, writes expert weights, never a norm's output).
//
// Which forms a norm writes is learned per norm (its weight's address): both
// the first time, then those its products read or asked for while its rows
// were kept (a Q4_K_M file whose k and v are Q8_0 reads both after the
// attention norm, only Q8_K after the FFN norm; a file of K-family weights
// only Q8_K anywhere). A product asking for a form the norm did not write
// quantizes its own rows (the same bits) and the norm writes it next time.
//
//   NormQuantCache cache;
//   if (NormQuantCache::Fits(y.rows, y.cols)) {   // buffer of Bytes(rows, cols)
//     uint8_t forms = cache.FormsFor(norm_weight);
//     ... norm kernel writing those forms at base + 0 and base + Q8_0Offset(..) ...
//     cache.Filled(y.data, y.rows, y.cols, norm_weight, forms);
//   }
//   if (std::optional<size_t> at = cache.Find(plan.path, x)) xq = base + *at;
//   cache.DropIfWrites(y);                                          // outputs
//   cache.Drop();                                                   // any other op
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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
  /// The forms, as bits.
  static constexpr uint8_t kQ8K = 1;
  static constexpr uint8_t kQ8_0 = 2;

  /// Whether a norm output of rows x cols is kept quantized.
  static bool Fits(int64_t rows, int64_t cols);
  /// Offset of the Q8_0 form (codes, then scales, as the products' scratch)
  /// after the Q8_K form at 0; a multiple of 16.
  static size_t Q8_0Offset(int64_t rows, int64_t cols);
  /// Bytes of both forms.
  static size_t Bytes(int64_t rows, int64_t cols);

  /// The forms a norm with this weight should write: both until its
  /// products have been seen, then what they read or asked for (maybe none).
  uint8_t FormsFor(const float* norm_weight) const;
  /// The buffer now holds `forms` of these rows (none is a valid record: the
  /// products' requests are still noted).
  void Filled(const float* rows_data, int64_t rows, int64_t cols, const float* norm_weight,
              uint8_t forms);
  /// Forget them.
  void Drop();
  /// Forget them when [p, p + bytes) overlaps the rows.
  void DropIfWrites(const void* p, size_t bytes);
  void DropIfWrites(Mat m) {
    DropIfWrites(m.data, static_cast<size_t>(m.rows * m.cols) * sizeof(float));
  }
  /// The offset of x's quantized form for a product on `path` (kQuantized:
  /// Q8_0, kQuantizedK: Q8_K), when x is exactly the rows kept and the norm
  /// wrote that form; counts hits. A form asked for is noted either way.
  std::optional<size_t> Find(MatMulPath path, ConstMat x);

  bool valid() const { return valid_; }
  /// How many products read a kept form instead of quantizing.
  uint64_t hits() const { return hits_; }

 private:
  /// The forms the open record's products asked for become its norm's.
  void Learn();

  const float* data_ = nullptr;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  const float* weight_ = nullptr;
  uint8_t forms_ = 0;  // written
  uint8_t asked_ = 0;  // read or asked for since Filled
  bool valid_ = false;
  uint64_t hits_ = 0;
  std::map<const float*, uint8_t> learned_;  // a few entries: one per norm
};

}  // namespace odmoe
