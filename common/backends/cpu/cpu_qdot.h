// Data layouts of the quantized MatMul with block32 weights (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4), internal to the CPU backend.
//
// As in the GGUF engines, a MatMul with block32 weights first quantizes
// every row of x to Q8_0 blocks (QuantizeRow of tensor/quant.h, the one
// scalar routine), then takes exact integer dot products per 32-element
// block; the float side follows the canonical order of cpu_backend.h. Blocks
// are handled in groups of 16 (one per canonical lane), in two layouts:
//
//   QActGroup     16 blocks of one activation row: the codes interleaved
//                 (below), the f16-decoded scales, the sums of the codes.
//   QWeightGroup  16 blocks of one weight row, unpacked and interleaved the
//                 same way by a kernel table's qpack_rows (what the codes
//                 hold, e.g. w ^ 0x80 or 4-bit values, is that table's own
//                 business), with the decoded scales (and mins: Q4_1, Q5_1).
//
// Interleaved layout: the 512 code bytes of a group hold element e (0..31) of
// block j (0..15) at byte 64 * (e / 4) + 4 * j + e % 4, i.e. 8 slices of 64
// bytes, slice m holding elements 4m..4m+3 of every block. A SIMD integer
// dot of one slice then yields 16 partial sums, one per block, in block order:
// no horizontal reduction is needed. Groups past the end of a row are padded
// with zero blocks (scale 0, codes 0), which leave every lane unchanged.
//
//   CpuQuantScratch scratch;
//   QActs acts = QuantizeActivations(x, kernels, &scratch, &pool);   // once per MatMul
//   kernels.qdot_rows(DType::kQ8_0, w, row_bytes, /*nw=*/4, blocks, acts, /*nx=*/1, y, ldy);
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace odmoe {

/// Where a block32 type keeps its fields (tensor/quant_blocks.h): block
/// bytes, offsets of the codes, the fifth bits (-1: none) and the f16 min
/// (-1: none); the scale is the f16 at offset 0, or for MXFP4 the E8M0 byte.
struct QLayout {
  int bytes, qs, qh, m;
  bool e8m0;
};

inline constexpr QLayout QLayoutOf(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return {kQ8_0BlockBytes, 2, -1, -1, false};
    case DType::kQ4_0:
      return {kQ4_0BlockBytes, 2, -1, -1, false};
    case DType::kQ4_1:
      return {sizeof(BlockQ4_1), 4, -1, 2, false};
    case DType::kQ5_0:
      return {sizeof(BlockQ5_0), 6, 2, -1, false};
    case DType::kQ5_1:
      return {sizeof(BlockQ5_1), 8, 4, 2, false};
    case DType::kIQ4_NL:
      return {sizeof(BlockIq4Nl), 2, -1, -1, false};
    case DType::kMXFP4:
      return {sizeof(BlockMxfp4), 1, -1, -1, true};
    default:
      return {0, 0, -1, -1, false};
  }
}

/// The block32 types of the quantized MatMul (the kernel tables dispatch
/// through function tables in this order, cpu_qdot_impl.h).
inline constexpr DType kQDotTypes[] = {DType::kQ8_0, DType::kQ4_0,   DType::kQ4_1, DType::kQ5_0,
                                       DType::kQ5_1, DType::kIQ4_NL, DType::kMXFP4};

/// Position of `type` in kQDotTypes (the caller passes one of them).
inline constexpr size_t QDotTypeIndex(DType type) {
  for (size_t i = 0; i < std::size(kQDotTypes); ++i) {
    if (kQDotTypes[i] == type) return i;
  }
  return 0;
}

/// Blocks per group: one per canonical lane.
inline constexpr int kQGroupBlocks = 16;
/// Code bytes of a group (16 blocks of 32 elements).
inline constexpr int kQGroupBytes = kQGroupBlocks * 32;

/// 16 blocks of an activation row quantized to Q8_0.
struct alignas(64) QActGroup {
  int8_t qs[kQGroupBytes];     // interleaved codes, each in [-127, 127]
  float d[kQGroupBlocks];      // block scales, F16ToF32 of the Q8_0 scale
  int32_t sum[kQGroupBlocks];  // sum of the block's 32 codes
};
static_assert(sizeof(QActGroup) == 640);

/// 16 blocks of a weight row as packed by a kernel table's qpack_rows.
struct alignas(64) QWeightGroup {
  uint8_t qs[kQGroupBytes];  // interleaved codes in the table's encoding
  float d[kQGroupBlocks];    // block scales: F16ToF32 of d (MXFP4: E8M0Half(e))
  float m[kQGroupBlocks];    // F16ToF32 of the block mins (Q4_1, Q5_1 only)
};
static_assert(sizeof(QWeightGroup) == 640);

/// Groups needed for `blocks` blocks.
inline int64_t QGroups(int64_t blocks) { return (blocks + kQGroupBlocks - 1) / kQGroupBlocks; }

/// Quantized activation rows: row t is groups[t * groups_per_row, ...).
struct QActs {
  const QActGroup* groups = nullptr;
  int64_t groups_per_row = 0;
  const QActGroup* Row(int64_t t) const { return groups + t * groups_per_row; }
};

/// Buffers of the quantized MatMul owned by a CpuBackend: allocated on first
/// use, grown when a call needs more, never shrunk.
struct CpuQuantScratch {
  std::vector<BlockQ8_0> blocks;  // QuantizeRow output, blocks_per_row per row
  std::vector<QActGroup> acts;
};

/// Quantizes every row of x (x.cols a multiple of 32) to Q8_0 with
/// QuantizeRow and lays it out as QActGroups in `scratch` (with the table's
/// quantize_q8_0_acts where it has one: the same bits); rows are spread
/// over `pool`. The result stays valid until the next call on `scratch`.
struct CpuKernels;
QActs QuantizeActivations(ConstMat x, const CpuKernels& kernels, CpuQuantScratch* scratch,
                          ThreadPool* pool);

}  // namespace odmoe
