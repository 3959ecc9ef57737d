// A non-owning view of a tensor stored in memory (usually a memory-mapped
// model file).
//
// Shapes use GGUF/GGML order: ne[0] is the innermost, contiguous dimension.
// A weight matrix of a linear layer y = W x with `in` inputs and `out`
// outputs has ne = {in, out}: each of its `out` rows holds `in` elements.
// 3-D expert tensors have ne = {in, out, n_expert}.
//
//   TensorView w = file.Tensor("blk.0.attn_q.weight").value();
//   int64_t rows = w.ne[1];                       // output features
//   const uint8_t* row3 = w.Row(3);               // bytes of row 3
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace odmoe {

struct TensorView {
  std::string name;
  DType type = DType::kF32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // elements per dimension (unused dims are 1)
  const void* data = nullptr;                // first byte

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  /// Bytes of one row (ne[0] elements).
  size_t row_bytes() const { return RowBytes(type, ne[0]); }
  /// Number of rows (product of all dims but the first).
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows()); }
  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes();
  }
  /// The 2-D matrix at index `i` of the third dimension (e.g. one expert of a
  /// stacked 3-D expert tensor), named "<name>[i]". Zero-copy; 0 <= i < ne[2].
  TensorView Slice2D(int64_t i) const;
};

}  // namespace odmoe
