// MatMul with block32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4):
// quantize the activations once, then exact integer block dots (cpu_qdot.h),
// parallel over blocks of 4 weight rows (of every product of a batch at once).
//
// One activation row (decode) streams the weight blocks straight from the
// model through qdot_rows. With several rows (prefill) each block of 4 weight
// rows is unpacked once into a per-thread scratch (qpack_rows) and dotted with
// every activation row by the register-tiled qdot_packed. Both compute the
// canonical quantized dot, so the choice never changes a bit.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_ops.h"
#include "cpu_qdot.h"
#include "tensor/quant.h"
#include "util/fp16.h"

namespace odmoe {

namespace {

constexpr int kRowsPerBlock = 4;
// From this many activation rows on, the weight blocks are unpacked once.
constexpr int64_t kMinRowsForPacking = 2;

/// Lays out one row of Q8_0 blocks as groups (interleaved codes, decoded
/// scales, code sums), zero-padding the last group.
void InterleaveRow(const BlockQ8_0* blocks, int64_t count, QActGroup* out, int64_t groups) {
  std::memset(static_cast<void*>(out), 0, static_cast<size_t>(groups) * sizeof(QActGroup));
  for (int64_t b = 0; b < count; ++b) {
    QActGroup& g = out[b / kQGroupBlocks];
    const int j = static_cast<int>(b % kQGroupBlocks);
    int32_t sum = 0;
    for (int e = 0; e < kQ8_0BlockElems; ++e) {
      g.qs[64 * (e / 4) + 4 * j + e % 4] = blocks[b].qs[e];
      sum += blocks[b].qs[e];
    }
    g.d[j] = F16ToF32(blocks[b].d);
    g.sum[j] = sum;
  }
}

}  // namespace

QActs QuantizeActivations(ConstMat x, const CpuKernels& kernels, CpuQuantScratch* scratch,
                          ThreadPool* pool) {
  const int64_t blocks = x.cols / kQ8_0BlockElems;
  const int64_t groups = QGroups(blocks);
  const size_t need_blocks = kernels.quantize_q8_0_acts ? 0 : static_cast<size_t>(x.rows * blocks);
  const size_t need_groups = static_cast<size_t>(x.rows * groups);
  if (scratch->blocks.size() < need_blocks) scratch->blocks.resize(need_blocks);
  if (scratch->acts.size() < need_groups) scratch->acts.resize(need_groups);
  BlockQ8_0* raw = scratch->blocks.data();
  QActGroup* acts = scratch->acts.data();
  pool->ParallelFor(x.rows, CpuRowGrain(4 * x.cols), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (kernels.quantize_q8_0_acts != nullptr) {
        kernels.quantize_q8_0_acts(x.Row(t), blocks, acts + t * groups);
        continue;
      }
      QuantizeRow(DType::kQ8_0, x.Row(t), raw + t * blocks, x.cols);
      InterleaveRow(raw + t * blocks, blocks, acts + t * groups, groups);
    }
  });
  return QActs{acts, groups};
}

void CpuQuantMatMulBatch(const CpuOpContext& ctx, ConstMat x,
                         std::span<const CpuProduct> products) {
  const WeightRef& w0 = *products.front().w;
  const int64_t n = products.front().y.rows;
  const int64_t blocks = w0.cols / kQ8_0BlockElems;
  const int64_t groups = QGroups(blocks);
  const QActs acts = QuantizeActivations(x, *ctx.kernels, ctx.quant_scratch, ctx.pool);
  const CpuKernels& kern = *ctx.kernels;
  // Product p's blocks of kRowsPerBlock weight rows are units [starts[p], starts[p + 1]).
  thread_local std::vector<int64_t> starts;
  starts.assign(1, 0);
  for (const CpuProduct& p : products) {
    starts.push_back(starts.back() + (p.w->rows + kRowsPerBlock - 1) / kRowsPerBlock);
  }
  CpuParallelOverProducts(
      ctx.pool, starts, CpuRowGrain(kRowsPerBlock * w0.cols * n),
      [&](size_t i, int64_t l0, int64_t l1) {
        thread_local std::vector<QWeightGroup> packed;
        const CpuProduct& p = products[i];
        const WeightRef& w = *p.w;
        const QActs rows_acts{acts.Row(p.row0), acts.groups_per_row};
        const size_t row_bytes = w.row_bytes();
        for (int64_t b = l0; b < l1; ++b) {
          const int64_t o = b * kRowsPerBlock;
          const int nw = static_cast<int>(std::min<int64_t>(kRowsPerBlock, w.rows - o));
          const uint8_t* rows =
              static_cast<const uint8_t*>(w.data) + static_cast<size_t>(o) * row_bytes;
          if (n < kMinRowsForPacking) {
            kern.qdot_rows(w.type, rows, row_bytes, nw, blocks, rows_acts, n, p.y.data + o, w.rows);
          } else {
            const size_t need = static_cast<size_t>(kRowsPerBlock * groups);
            if (packed.size() < need) packed.resize(need);
            kern.qpack_rows(w.type, rows, row_bytes, nw, blocks, packed.data());
            kern.qdot_packed(w.type, packed.data(), nw, groups, rows_acts, n, p.y.data + o, w.rows);
          }
        }
      });
}

}  // namespace odmoe
