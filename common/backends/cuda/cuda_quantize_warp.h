// The activation quantizers' per-block work, one warp per block (internal;
// include only from .cu files). The quantize kernels (cuda_matmul.cu,
// cuda_matmul_k.cu) and the norm that quantizes its own output
// (cuda_ops.cu, RmsNormKernel) share them, so every path gives
// tensor/quant.h's QuantizeRow bits for the same floats.
//
//   const int l = threadIdx.x % 32;            // every lane of the warp calls
//   QuantizeBlockQ8_0Warp(PlainRows{x}, b, &codes[b], &scales[b], l);
//   QuantizeSuperBlockWarp(PlainRows{x}, s, &xq[s], l);
//
// `src` is any type with `float Get(int64_t i) const` (cuda_kernel_util.h:
// PlainRows, SwiGluRows); Get is called once per element.
#pragma once

#include <cstdint>

#include "cuda_kernel_util.h"
#include "cuda_numerics_block32.h"
#include "cuda_numerics_kquant.h"

namespace odmoe::cuda {

/// Q8_0 block b (elements 32b .. 32b + 31 of src) into *code and *scale,
/// lane l taking element l: the largest magnitude (NaN skipped: a maximum of
/// non-NaN values, so any merge order gives QuantizeBlockQ8_0's), then each
/// lane's code, its byte OR-ed into word l / 4 across the four lanes of the
/// word (exact), written by lane 4w.
template <class Src>
__device__ __forceinline__ void QuantizeBlockQ8_0Warp(const Src& src, int64_t b,
                                                      cuda_numerics::QActBlock* code,
                                                      float* scale, int l) {
  const float v = src.Get(32 * b + l);
  float amax = cuda_numerics::MaxSkipNan(0.0f, cuda_numerics::Abs(v));
  for (int off = 16; off > 0; off /= 2) {
    amax = cuda_numerics::MaxSkipNan(amax, __shfl_xor_sync(kFullMask, amax, off));
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint32_t word = (static_cast<uint32_t>(cuda_numerics::ClampedRound(v * id)) & 0xffu)
                  << (8 * (l % 4));
  word |= __shfl_xor_sync(kFullMask, word, 1);
  word |= __shfl_xor_sync(kFullMask, word, 2);
  if (l % 4 == 0) code->qs[l / 4] = static_cast<int32_t>(word);
  if (l == 0) *scale = cuda_numerics::F16ToF32(cuda_numerics::F32ToF16(d));
}

/// Q8_K super-block s (elements 256s .. 256s + 255 of src) into *out: lane l
/// reads elements 8l .. 8l + 7 once, the picks of the largest magnitude are
/// merged across the warp (merging in any order gives the sequential scan's
/// pick), then lane l writes code words 2l and 2l + 1 and the even lanes the
/// per-16 sums.
template <class Src>
__device__ __forceinline__ void QuantizeSuperBlockWarp(const Src& src, int64_t s,
                                                       cuda_numerics::QActSuperBlock* out, int l) {
  namespace num = cuda_numerics;
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = src.Get(s * kSuperBlockElems + 8 * l + i);
  num::AbsMaxPick p;
#pragma unroll
  for (int i = 0; i < 8; ++i) num::PickAbsMax(&p, v[i], 8 * l + i);
  for (int off = 16; off > 0; off /= 2) {
    num::AbsMaxPick q;
    q.amax = __shfl_xor_sync(kFullMask, p.amax, off);
    q.max = __shfl_xor_sync(kFullMask, p.max, off);
    q.index = __shfl_xor_sync(kFullMask, p.index, off);
    p = num::MergeAbsMax(p, q);
  }
  const bool zero = p.amax == 0.0f;
  const float iscale = num::Q8KInverseScale(p);
  const int32_t w0 = zero ? 0 : num::Q8KCodeWord(iscale, v);
  const int32_t w1 = zero ? 0 : num::Q8KCodeWord(iscale, v + 4);
  out->qs[2 * l] = w0;
  out->qs[2 * l + 1] = w1;
  const int32_t sum8 = num::ByteSum(w0) + num::ByteSum(w1);
  const int32_t next = __shfl_down_sync(kFullMask, sum8, 1);
  if (l % 2 == 0) out->bsum[l / 2] = sum8 + next;
  if (l == 0) out->d = zero ? 0.0f : 1.0f / iscale;
}

}  // namespace odmoe::cuda
