// Row conversion for the two families of quantized types (internal to
// odmoe_tensor; tensor/quant.h's DequantizeRow / QuantizeRow dispatch here).
//
//   block32 (quant_block32.cpp): Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4
//   K family (quant_kfamily.cpp): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS
// (IQ4_NL's quantizer: quant_iq4nl.cpp.)
// (Q8_0 and Q4_0 live in quant.cpp.) `n` is a whole number of blocks.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace odmoe::quant_internal {

void DequantizeBlock32Row(DType type, const void* src, float* dst, int64_t n);
void QuantizeBlock32Row(DType type, const float* src, void* dst, int64_t n);

/// IQ4_NL's quantizer (quant_iq4nl.cpp), `nb` blocks.
void QuantizeIq4NlRow(const float* src, BlockIq4Nl* dst, int64_t nb);

void DequantizeKRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeKRow(DType type, const float* src, void* dst, int64_t n);

}  // namespace odmoe::quant_internal
