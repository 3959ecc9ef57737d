#include "tensor/tensor_view.h"

#include <cassert>

namespace odmoe {

TensorView TensorView::Slice2D(int64_t i) const {
  assert(i >= 0 && i < ne[2] && ne[3] == 1);
  TensorView slice;
  slice.name = name + "[" + std::to_string(i) + "]";
  slice.type = type;
  slice.n_dims = 2;
  slice.ne = {ne[0], ne[1], 1, 1};
  slice.data = static_cast<const uint8_t*>(data) +
               static_cast<size_t>(i) * static_cast<size_t>(ne[1]) * row_bytes();
  return slice;
}

}  // namespace odmoe
