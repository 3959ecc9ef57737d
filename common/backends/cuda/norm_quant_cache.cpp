#include "norm_quant_cache.h"

#include <cstdint>

namespace odmoe {

bool NormQuantCache::Fits(int64_t rows, int64_t cols) {
  return rows >= 1 && rows <= kMaxRows && cols > 0 && cols % kSuperBlockElems == 0;
}

size_t NormQuantCache::Q8_0Offset(int64_t rows, int64_t cols) {
  const size_t k = QuantizedKActivationBytes(rows, cols);
  return (k + 15) / 16 * 16;
}

size_t NormQuantCache::Bytes(int64_t rows, int64_t cols) {
  return Q8_0Offset(rows, cols) + QuantizedActivationBytes(rows, cols);
}

void NormQuantCache::Filled(const float* rows_data, int64_t rows, int64_t cols) {
  data_ = rows_data;
  rows_ = rows;
  cols_ = cols;
  valid_ = true;
}

void NormQuantCache::DropIfWrites(const void* p, size_t bytes) {
  if (!valid_ || bytes == 0 || p == nullptr) return;
  const auto lo = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t hi = lo + static_cast<uintptr_t>(rows_ * cols_) * sizeof(float);
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a < hi && lo < a + bytes) valid_ = false;
}

std::optional<size_t> NormQuantCache::Find(MatMulPath path, ConstMat x) {
  if (!valid_ || x.data != data_ || x.rows != rows_ || x.cols != cols_) return std::nullopt;
  if (path == MatMulPath::kQuantizedK) {
    ++hits_;
    return size_t{0};
  }
  if (path == MatMulPath::kQuantized) {
    ++hits_;
    return Q8_0Offset(rows_, cols_);
  }
  return std::nullopt;
}

}  // namespace odmoe
