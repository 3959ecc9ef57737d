// Data layouts of the quantized MatMul (Q8_0 / Q4_0 weights), internal to the
// CPU backend.
//
// As in the GGUF engines, a MatMul with Q8_0 or Q4_0 weights first quantizes
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
//                 business), with the f16-decoded scales.
//
// Interleaved layout: the 512 code bytes of a group hold element e (0..31) of
// block j (0..15) at byte 64 * (e / 4) + 4 * j + e % 4, i.e. 8 slices of 64
// bytes, slice m holding elements 4m..4m+3 of every block. A SIMD integer
// dot of one slice then yields 16 partial sums, one per block, in block order:
// no horizontal reduction is needed. Groups past the end of a row are padded
// with zero blocks (scale 0, codes 0), which leave every lane unchanged.
//
//   CpuQuantScratch scratch;
//   QActs acts = QuantizeActivations(x, &scratch, &pool);   // once per MatMul
//   kernels.qdot_rows(DType::kQ8_0, w, row_bytes, /*nw=*/4, blocks, acts, /*nx=*/1, y, ldy);
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace odmoe {

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
  float d[kQGroupBlocks];    // block scales, F16ToF32 of the stored scale
};
static_assert(sizeof(QWeightGroup) == 576);

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
/// QuantizeRow and lays it out as QActGroups in `scratch`; rows are spread
/// over `pool`. The result stays valid until the next call on `scratch`.
QActs QuantizeActivations(ConstMat x, CpuQuantScratch* scratch, ThreadPool* pool);

}  // namespace odmoe
