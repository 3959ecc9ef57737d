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

uint8_t NormQuantCache::FormsFor(const float* norm_weight) const {
  const auto it = learned_.find(norm_weight);
  return it == learned_.end() ? static_cast<uint8_t>(kQ8K | kQ8_0) : it->second;
}

void NormQuantCache::Learn() {
  if (valid_) learned_[weight_] = asked_;
}

void NormQuantCache::Filled(const float* rows_data, int64_t rows, int64_t cols,
                            const float* norm_weight, uint8_t forms) {
  Learn();
  data_ = rows_data;
  rows_ = rows;
  cols_ = cols;
  weight_ = norm_weight;
  forms_ = forms;
  asked_ = 0;
  valid_ = true;
}

void NormQuantCache::Drop() {
  Learn();
  valid_ = false;
}

void NormQuantCache::DropIfWrites(const void* p, size_t bytes) {
  if (!valid_ || bytes == 0 || p == nullptr) return;
  const auto lo = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t hi = lo + static_cast<uintptr_t>(rows_ * cols_) * sizeof(float);
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a < hi && lo < a + bytes) Drop();
}

std::optional<size_t> NormQuantCache::Find(MatMulPath path, ConstMat x) {
  if (!valid_ || x.data != data_ || x.rows != rows_ || x.cols != cols_) return std::nullopt;
  const uint8_t form = path == MatMulPath::kQuantizedK  ? kQ8K
                       : path == MatMulPath::kQuantized ? kQ8_0
                                                        : 0;
  if (form == 0) return std::nullopt;
  asked_ |= form;
  if ((forms_ & form) == 0) return std::nullopt;
  ++hits_;
  return form == kQ8K ? size_t{0} : Q8_0Offset(rows_, cols_);
}

}  // namespace odmoe
