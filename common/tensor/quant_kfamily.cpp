// Dequantization and quantization of Q2_K .. Q6_K, Q8_K, IQ4_XS (see tensor/quant.h).
#include <cassert>

#include "tensor/quant_families.h"

namespace odmoe::quant_internal {

void DequantizeKRow(DType type, const void* src, float* dst, int64_t n) {
  assert(false && "DequantizeKRow: type not implemented yet");
}

void QuantizeKRow(DType type, const float* src, void* dst, int64_t n) {
  assert(false && "QuantizeKRow: type not implemented yet");
}

}  // namespace odmoe::quant_internal
