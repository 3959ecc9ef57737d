// Dequantization and quantization of Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (see tensor/quant.h).
#include <cassert>

#include "tensor/quant_families.h"

namespace odmoe::quant_internal {

void DequantizeBlock32Row(DType type, const void* src, float* dst, int64_t n) {
  assert(false && "DequantizeBlock32Row: type not implemented yet");
}

void QuantizeBlock32Row(DType type, const float* src, void* dst, int64_t n) {
  assert(false && "QuantizeBlock32Row: type not implemented yet");
}

}  // namespace odmoe::quant_internal
