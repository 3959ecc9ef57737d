// MatMul with K-family weights (Q2_K .. Q6_K, IQ4_XS): Q8_K activations and
// the canonical K-family dot of cpu_backend.h, parallel over units of weight
// rows (interleaved groups of 16, then blocks of 4 or tiles of 16) of every
// product of a batch (CpuMatMulBatch) at once.
//
// One activation row (decode) streams the weight super-blocks straight from
// the model through dot_rows, or, for weights the backend keeps in
// KInterleave16, 16 rows at a time through dot_interleaved (up to 3
// activation rows one after the other; more go to the tiles, packed straight
// from the interleaved groups' words). With several rows (prefill) each block of 4
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
// Up to this many, interleaved weights are dotted with one activation row
// after the other by the decode kernel; from one more on they go to the tiles,
// packed straight from the groups' words (measured on 14336 x 4096: at 2 rows
// the decode kernel is 1.4-2x the row-order path; at 8 rows the tiles beat it
// 1.2-2.1x on q2_K, q3_K, q5_K, q6_K, iq4_xs, q4_K within the noise).
constexpr int64_t kMaxRowsForInterleavedDecode = 3;
// From this many on, ISAs with tile kernels (cpu_kquant_tile_impl.h) use them.
constexpr int64_t kMinRowsForTiles = 4;
// Activation rows per dot_tile call of a row-major weight (a multiple of the
// kernels' 8 rows a pass), between slices of the next tile's prefetch.
constexpr int64_t kTileChunkRows = 64;

/// Whether a MatMul of n activation rows takes the tiles (every path below
/// does from kMinRowsForTiles rows on where the ISA has them).
bool UsesTiles(const CpuKQuantKernels& kern, int64_t n) {
  return kern.dot_tile != nullptr && n >= kMinRowsForTiles;
}

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

void FlipKActCodes(KActBlock* blocks, int64_t count) {
  for (int64_t s = 0; s < count; ++s) {
    auto* q = reinterpret_cast<uint8_t*>(blocks[s].qs);
    for (int i = 0; i < kSuperBlockElems; ++i) q[i] ^= 0x80;
  }
}

KActs QuantizeKActivations(ConstMat x, const CpuKQuantKernels& kernels, CpuKQuantScratch* scratch,
                           ThreadPool* pool, bool biased) {
  const int64_t count = x.cols / kSuperBlockElems;
  int64_t stride = (count + kKGroupBlocks - 1) / kKGroupBlocks * kKGroupBlocks;
  // Rows a multiple of 4 KiB apart share their L1 sets: the tile kernels
  // read 8 rows side by side (8 ways of 8), so such strides grow by 16.
  while (stride * static_cast<int64_t>(sizeof(KActBlock)) % 4096 == 0) stride += kKGroupBlocks;
  const size_t need_raw = kernels.quantize_acts ? 0 : static_cast<size_t>(x.rows * count);
  const size_t need = static_cast<size_t>(x.rows * stride);
  if (scratch->raw.size() < need_raw) scratch->raw.resize(need_raw);
  if (scratch->blocks.size() < need) scratch->blocks.resize(need);
  if (scratch->d.size() < need) scratch->d.resize(need);
  BlockQ8K* raw = scratch->raw.data();
  KActBlock* blocks = scratch->blocks.data();
  float* d = scratch->d.data();
  pool->ParallelFor(x.rows, CpuRowGrain(4 * x.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (kernels.quantize_acts != nullptr) {
        kernels.quantize_acts(x.Row(t), count, blocks + t * stride, d + t * stride);
        for (int64_t s = count; s < stride; ++s) d[t * stride + s] = 0.0f;
      } else {
        QuantizeRow(DType::kQ8_K, x.Row(t), raw + t * count, x.cols);
        LayoutRow(raw + t * count, count, blocks + t * stride, d + t * stride, stride);
      }
      if (biased) FlipKActCodes(blocks + t * stride, count);
    }
  });
  return KActs{blocks, d, stride, biased};
}

namespace {

/// dot_tile of a packed tile with every activation row, kTileChunkRows rows
/// a call, fetching `ahead_bytes` at `ahead` (the next tile's stored rows) a
/// slice between calls: packing then reads them from cache instead of
/// waiting on 16 streams from memory (14336 x 4096 with 32 activation rows:
/// Q6_K 3 %, Q4_K 5.6 % faster).
void DotTileFetchingAhead(const CpuKQuantKernels& kern, DType type, const KTile* packed, int nw,
                          int64_t superblocks, const KActs& acts, int64_t n, float* y, int64_t ldy,
                          const uint8_t* ahead, size_t ahead_bytes) {
  const int64_t lines = static_cast<int64_t>((ahead_bytes + 63) / 64);
  const int64_t chunks = (n + kTileChunkRows - 1) / kTileChunkRows;
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t l = lines * c / chunks; l < lines * (c + 1) / chunks; ++l) {
      __builtin_prefetch(ahead + 64 * l, 0, 2);
    }
    const int64_t t0 = c * kTileChunkRows;
    const KActs part{acts.Row(t0), acts.Scales(t0), acts.stride, acts.biased};
    kern.dot_tile(type, packed, nw, superblocks, part, std::min(kTileChunkRows, n - t0),
                  y + t0 * ldy, ldy);
  }
}

/// Rows [0, nrows) of a row-major K-family weight (row r at rows + r *
/// row_bytes) against every activation row, to y[t * ldy + r], on the
/// calling thread: tiles of 16 rows with 4 or more activation rows where the
/// ISA has them, else blocks of 4 rows, unpacked once from 2 activation rows
/// on, read as stored for one.
void RowMajorRows(const CpuKQuantKernels& kern, DType type, const uint8_t* rows, size_t row_bytes,
                  int64_t nrows, int64_t superblocks, const KActs& acts, int64_t n, float* y,
                  int64_t ldy) {
  if (UsesTiles(kern, n)) {
    thread_local std::vector<KTile> packed;
    if (packed.size() < static_cast<size_t>(superblocks)) packed.resize(superblocks);
    for (int64_t o = 0; o < nrows; o += kKTileRows) {
      const int nw = static_cast<int>(std::min<int64_t>(kKTileRows, nrows - o));
      kern.pack_tile(type, rows + static_cast<size_t>(o) * row_bytes, row_bytes, nw, superblocks,
                     packed.data());
      const int64_t next = std::min<int64_t>(kKTileRows, nrows - o - nw);  // rows are contiguous
      DotTileFetchingAhead(kern, type, packed.data(), nw, superblocks, acts, n, y + o, ldy,
                           rows + static_cast<size_t>(o + nw) * row_bytes,
                           static_cast<size_t>(next) * row_bytes);
    }
    return;
  }
  thread_local std::vector<KUnpacked> unpacked;
  for (int64_t o = 0; o < nrows; o += kRowsPerBlock) {
    const int nw = static_cast<int>(std::min<int64_t>(kRowsPerBlock, nrows - o));
    const uint8_t* block = rows + static_cast<size_t>(o) * row_bytes;
    if (n < kMinRowsForUnpacking) {
      kern.dot_rows(type, block, row_bytes, nw, superblocks, acts, n, y + o, ldy);
    } else {
      const size_t need = static_cast<size_t>(kRowsPerBlock * superblocks);
      if (unpacked.size() < need) unpacked.resize(need);
      kern.unpack_rows(type, block, row_bytes, nw, superblocks, unpacked.data());
      kern.dot_unpacked(type, unpacked.data(), nw, superblocks, acts, n, y + o, ldy);
    }
  }
}

/// Groups [g0, g1) of a KInterleave16 weight (16 rows each, from `base`)
/// against every activation row, to y[t * ldy + row], on the calling thread.
void InterleavedGroups(const CpuKQuantKernels& kern, DType type, const uint8_t* base,
                       size_t row_bytes, int64_t superblocks, int64_t g0, int64_t g1,
                       const KActs& acts, int64_t n, float* y, int64_t ldy, bool direct) {
  thread_local std::vector<uint8_t> rows;
  const size_t group_bytes = kInterleaveRows * row_bytes;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* group = base + static_cast<size_t>(g) * group_bytes;
    float* yg = y + g * kInterleaveRows;
    if (direct) {  // the group stays in L1 / L2 from one activation row to the next
      for (int64_t t = 0; t < n; ++t) {
        const KActs row{acts.Row(t), acts.Scales(t), acts.stride};
        kern.dot_interleaved(type, group, superblocks, row, yg + t * ldy);
      }
      continue;
    }
    if (UsesTiles(kern, n) && kern.pack_tile_interleaved != nullptr) {
      thread_local std::vector<KTile> packed;
      if (packed.size() < static_cast<size_t>(superblocks)) packed.resize(superblocks);
      kern.pack_tile_interleaved(type, group, superblocks, packed.data());
      DotTileFetchingAhead(kern, type, packed.data(), kInterleaveRows, superblocks, acts, n, yg,
                           ldy, group + group_bytes, g + 1 < g1 ? group_bytes : 0);
      continue;
    }
    // An ISA without these kernels (LoadWeight never interleaves for one; a
    // caller may still hand it such a weight): back to row order.
    if (rows.size() < group_bytes) rows.resize(group_bytes);
    DeinterleaveKRows(type, group, row_bytes, rows.data());
    RowMajorRows(kern, type, rows.data(), row_bytes, kInterleaveRows, superblocks, acts, n, yg,
                 ldy);
  }
}

/// One product of a batch as parallel units: a KInterleave16 weight's whole
/// groups of 16 rows first, then the rows after them (every row of a
/// row-major weight) in units of `unit` rows.
struct KProductUnits {
  const CpuProduct* product = nullptr;
  KActs acts;          // the product's activation rows
  int64_t groups = 0;  // interleaved groups
  int64_t units = 0;   // groups + units of the rows after them
};

/// Units [l0, l1) of one product of a batch, on the calling thread.
void RunKProductUnits(const CpuKQuantKernels& kern, const KProductUnits& u, int64_t l0, int64_t l1,
                      int64_t superblocks, int64_t n, int64_t unit, bool direct) {
  const WeightRef& w = *u.product->w;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes();
  float* y = u.product->y.data;
  if (l0 < u.groups) {
    InterleavedGroups(kern, w.type, base, row_bytes, superblocks, l0, std::min(l1, u.groups),
                      u.acts, n, y, w.rows, direct);
  }
  if (l1 > u.groups) {
    const int64_t first = u.groups * kInterleaveRows;
    const int64_t r0 = first + (std::max(l0, u.groups) - u.groups) * unit;
    const int64_t r1 = std::min(w.rows, first + (l1 - u.groups) * unit);
    RowMajorRows(kern, w.type, base + static_cast<size_t>(r0) * row_bytes, row_bytes, r1 - r0,
                 superblocks, u.acts, n, y + r0, w.rows);
  }
}

}  // namespace

void CpuKQuantMatMulBatch(const CpuOpContext& ctx, ConstMat x,
                          std::span<const CpuProduct> products) {
  // The calling thread's buffers: ops on one backend never run concurrently,
  // and backends on other threads get their own.
  thread_local CpuKQuantScratch act_scratch;
  const WeightRef& w0 = *products.front().w;
  const DType type = w0.type;
  const int64_t n = products.front().y.rows;
  const int64_t superblocks = w0.cols / kSuperBlockElems;
  const CpuKQuantKernels& kern = CpuKQuantKernelsFor(ctx.kernels->isa);
  const KActs acts = QuantizeKActivations(x, kern, &act_scratch, ctx.pool,
                                          UsesTiles(kern, n) && TileTakesBiasedActs(type));
  const int64_t unit = UsesTiles(kern, n) ? kKTileRows : kRowsPerBlock;
  const bool direct =
      n <= kMaxRowsForInterleavedDecode && kern.interleaved != nullptr && kern.interleaved(type);
  // Every product's units, and where each starts in the batch's numbering.
  thread_local std::vector<KProductUnits> parts;
  thread_local std::vector<int64_t> starts;
  parts.clear();
  starts.assign(1, 0);
  bool row_units = false;
  for (const CpuProduct& p : products) {
    KProductUnits u;
    u.product = &p;
    u.acts = KActs{acts.Row(p.row0), acts.Scales(p.row0), acts.stride, acts.biased};
    u.groups = p.w->layout == WeightLayout::kInterleaved16 ? p.w->rows / kInterleaveRows : 0;
    const int64_t rest = p.w->rows - u.groups * kInterleaveRows;
    row_units = row_units || rest > 0;
    u.units = u.groups + (rest + unit - 1) / unit;
    parts.push_back(u);
    starts.push_back(starts.back() + u.units);
  }
  const std::vector<KProductUnits>& all = parts;
  CpuParallelOverProducts(ctx.pool, starts,
                          CpuRowGrain((row_units ? unit : kInterleaveRows) * w0.cols * n),
                          [&](size_t i, int64_t l0, int64_t l1) {
                            RunKProductUnits(kern, all[i], l0, l1, superblocks, n, unit, direct);
                          });
}

}  // namespace odmoe
