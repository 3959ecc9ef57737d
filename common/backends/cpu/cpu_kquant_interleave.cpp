// KInterleave16 (cpu_kquant.h): 16 K-family weight rows with their
// super-blocks' 4-byte words interleaved, and back. Plain byte moves, the
// definition of the layout for every ISA.
#include <cstring>

#include "cpu_isa.h"
#include "cpu_kquant.h"

namespace odmoe {

namespace {

/// Calls move(row, offset in the row, offset in the group, bytes) for every
/// piece of rows r0 .. r1 - 1 of a group of 16 rows of `row_bytes` (whole
/// super-blocks of type).
template <class Move>
void ForEachPiece(DType type, size_t row_bytes, int r0, int r1, Move&& move) {
  const size_t block = static_cast<size_t>(KBlockBytes(type));
  const size_t words = block / 4, tail = block % 4;
  const size_t superblocks = row_bytes / block;
  for (size_t s = 0; s < superblocks; ++s) {
    const size_t in_row = s * block;
    const size_t in_group = s * block * kInterleaveRows;
    for (int r = r0; r < r1; ++r) {
      for (size_t w = 0; w < words; ++w) {
        move(r, in_row + 4 * w, in_group + (w * kInterleaveRows + r) * 4, size_t{4});
      }
      if (tail != 0) {
        move(r, in_row + 4 * words, in_group + 4 * words * kInterleaveRows + r * tail, tail);
      }
    }
  }
}

}  // namespace

bool InterleavedDecodePays(DType type, size_t bytes) {
  const bool high_bits = type == DType::kQ5_K || type == DType::kQ6_K;
  return !(high_bits && CpuSplitsAvx512() && bytes > kInCacheWeightBytes);
}

void InterleaveKRows(DType type, const uint8_t* rows, size_t row_bytes, uint8_t* out) {
  ForEachPiece(type, row_bytes, 0, kInterleaveRows,
               [&](int r, size_t row_off, size_t group_off, size_t n) {
                 std::memcpy(out + group_off, rows + r * row_bytes + row_off, n);
               });
}

void DeinterleaveKRow(DType type, const uint8_t* group, size_t row_bytes, int r, uint8_t* out) {
  ForEachPiece(type, row_bytes, r, r + 1, [&](int, size_t row_off, size_t group_off, size_t n) {
    std::memcpy(out + row_off, group + group_off, n);
  });
}

void DeinterleaveKRows(DType type, const uint8_t* group, size_t row_bytes, uint8_t* rows) {
  ForEachPiece(type, row_bytes, 0, kInterleaveRows,
               [&](int r, size_t row_off, size_t group_off, size_t n) {
                 std::memcpy(rows + r * row_bytes + row_off, group + group_off, n);
               });
}

}  // namespace odmoe
