// The K family's weight quantizers (internal to odmoe_tensor; reached through
// tensor/quant.h's QuantizeRow). Each converts `n_blocks` super-blocks of 256
// floats with the GGUF ecosystem's reference algorithm without an importance
// matrix (the rules are documented in tensor/quant.h).
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace odmoe::quant_internal {

void QuantizeQ2K(const float* src, BlockQ2K* dst, int64_t n_blocks);
void QuantizeQ3K(const float* src, BlockQ3K* dst, int64_t n_blocks);
void QuantizeQ4K(const float* src, BlockQ4K* dst, int64_t n_blocks);
void QuantizeQ5K(const float* src, BlockQ5K* dst, int64_t n_blocks);
void QuantizeQ6K(const float* src, BlockQ6K* dst, int64_t n_blocks);
void QuantizeIq4Xs(const float* src, BlockIq4Xs* dst, int64_t n_blocks);

}  // namespace odmoe::quant_internal
