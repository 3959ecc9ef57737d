// MatMul with K-family weights (Q2_K .. Q6_K, IQ4_XS): Q8_K activations and
// the canonical K-family dot of cpu_backend.h, parallel over blocks of 4
// weight rows.
//
// One activation row (decode) streams the weight super-blocks straight from
// the model through dot_rows. With several rows (prefill) each block of 4
// weight rows is unpacked once into a per-thread scratch (unpack_rows) and
// dotted with every activation row by the register-tiled dot_unpacked. Both
// compute the same exact integers and the same float step, so the choice
// never changes a bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_kquant.h"
#include "cpu_ops.h"
#include "tensor/quant.h"

namespace odmoe {

namespace {

constexpr int kRowsPerBlock = 4;
// From this many activation rows on, the weight blocks are unpacked once.
constexpr int64_t kMinRowsForUnpacking = 2;
// From this many on, ISAs with tile kernels (cpu_kquant_tile_impl.h) use them.
constexpr int64_t kMinRowsForTiles = 4;

/// Copies one row of Q8_K super-blocks into the kernels' layout.
void LayoutRow(const BlockQ8K* raw, int64_t count, KActBlock* blocks, float* d, int64_t stride) {
  for (int64_t s = 0; s < count; ++s) {
    std::memcpy(blocks[s].qs, raw[s].qs, sizeof(blocks[s].qs));
    std::memcpy(blocks[s].bsums, raw[s].bsums, sizeof(blocks[s].bsums));
    d[s] = raw[s].d;
  }
  for (int64_t s = count; s < stride; ++s) d[s] = 0.0f;
}

}  // namespace

KActs QuantizeKActivations(ConstMat x, CpuKQuantScratch* scratch, ThreadPool* pool) {
  const int64_t count = x.cols / kSuperBlockElems;
  const int64_t stride = (count + kKGroupBlocks - 1) / kKGroupBlocks * kKGroupBlocks;
  const size_t need_raw = static_cast<size_t>(x.rows * count);
  const size_t need = static_cast<size_t>(x.rows * stride);
  if (scratch->raw.size() < need_raw) scratch->raw.resize(need_raw);
  if (scratch->blocks.size() < need) scratch->blocks.resize(need);
  if (scratch->d.size() < need) scratch->d.resize(need);
  BlockQ8K* raw = scratch->raw.data();
  KActBlock* blocks = scratch->blocks.data();
  float* d = scratch->d.data();
  pool->ParallelFor(x.rows, CpuRowGrain(4 * x.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      QuantizeRow(DType::kQ8_K, x.Row(t), raw + t * count, x.cols);
      LayoutRow(raw + t * count, count, blocks + t * stride, d + t * stride, stride);
    }
  });
  return KActs{blocks, d, stride};
}

void CpuKQuantMatMul(const CpuOpContext& ctx, const WeightRef& w, ConstMat x, Mat y) {
  // The calling thread's buffers: ops on one backend never run concurrently,
  // and backends on other threads get their own.
  thread_local CpuKQuantScratch act_scratch;
  const int64_t n = x.rows;
  const int64_t out = w.rows;
  const int64_t superblocks = w.cols / kSuperBlockElems;
  const KActs acts = QuantizeKActivations(x, &act_scratch, ctx.pool);
  const CpuKQuantKernels& kern = CpuKQuantKernelsFor(ctx.kernels->isa);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes();
  const int64_t row_blocks = (out + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t grain = CpuRowGrain(kRowsPerBlock * w.cols * n);
  if (kern.dot_tile != nullptr && n >= kMinRowsForTiles) {
    const int64_t tiles = (out + kKTileRows - 1) / kKTileRows;
    ctx.pool->ParallelFor(tiles, CpuRowGrain(kKTileRows * w.cols * n), [&](int64_t b0, int64_t b1) {
      thread_local std::vector<KTile> packed;
      if (packed.size() < static_cast<size_t>(superblocks)) packed.resize(superblocks);
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t o = b * kKTileRows;
        const int nw = static_cast<int>(std::min<int64_t>(kKTileRows, out - o));
        kern.pack_tile(w.type, base + static_cast<size_t>(o) * row_bytes, row_bytes, nw,
                       superblocks, packed.data());
        kern.dot_tile(w.type, packed.data(), nw, superblocks, acts, n, y.data + o, out);
      }
    });
    return;
  }
  ctx.pool->ParallelFor(row_blocks, grain, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<KUnpacked> unpacked;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o = b * kRowsPerBlock;
      const int nw = static_cast<int>(std::min<int64_t>(kRowsPerBlock, out - o));
      const uint8_t* rows = base + static_cast<size_t>(o) * row_bytes;
      if (n < kMinRowsForUnpacking) {
        kern.dot_rows(w.type, rows, row_bytes, nw, superblocks, acts, n, y.data + o, out);
      } else {
        const size_t need = static_cast<size_t>(kRowsPerBlock * superblocks);
        if (unpacked.size() < need) unpacked.resize(need);
        kern.unpack_rows(w.type, rows, row_bytes, nw, superblocks, unpacked.data());
        kern.dot_unpacked(w.type, unpacked.data(), nw, superblocks, acts, n, y.data + o, out);
      }
    }
  });
}

}  // namespace odmoe
