// MatMul: y = x * w^T, parallel over blocks of 4 weight rows.
//
// Float weights (F32, F16, BF16): one activation row (decode) streams the
// weight once through the fused convert-and-dot kernels. With several rows
// (prefill) each block of 4 weight rows is converted once into a per-thread
// f32 scratch and dotted with every row of x by the register-tiled kernel.
// Both paths use the canonical order, so the choice never changes a bit.
// Block32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) go to CpuQuantMatMul
// (cpu_qmatmul.cpp), K-family weights (Q2_K .. Q6_K, IQ4_XS) to CpuKQuantMatMul.
#include <algorithm>
#include <vector>

#include "cpu_ops.h"

namespace odmoe {

namespace {

constexpr int kRowsPerBlock = 4;
// From this many activation rows on, quantized weights go through the scratch.
constexpr int64_t kMinRowsForScratch = 4;

}  // namespace

bool CpuSupportsWeightType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kMXFP4:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

namespace {

/// MatMul with a float weight (F32, F16, BF16).
void CpuFloatMatMul(const CpuOpContext& ctx, const WeightRef& w, ConstMat x, Mat y) {
  const int64_t n = x.rows;
  const int64_t k = w.cols;
  const int64_t out = w.rows;
  const CpuKernels& kern = *ctx.kernels;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes();
  const int64_t blocks = (out + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t grain = CpuRowGrain(kRowsPerBlock * k * n);
  ctx.pool->ParallelFor(blocks, grain, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> scratch;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o = b * kRowsPerBlock;
      const int nw = static_cast<int>(std::min<int64_t>(kRowsPerBlock, out - o));
      const uint8_t* rows = base + static_cast<size_t>(o) * row_bytes;
      if (w.type == DType::kF32) {
        kern.tile_f32(reinterpret_cast<const float*>(rows), k, nw, x.data, k, n, k, y.data + o,
                      out);
      } else if (n < kMinRowsForScratch) {
        for (int64_t t = 0; t < n; ++t) {
          kern.dot_rows(w.type, rows, row_bytes, nw, x.Row(t), k, y.Row(t) + o);
        }
      } else {
        scratch.resize(static_cast<size_t>(kRowsPerBlock * k));
        for (int r = 0; r < nw; ++r) {
          kern.dequant_row(w.type, rows + r * row_bytes, scratch.data() + r * k, k);
        }
        kern.tile_f32(scratch.data(), k, nw, x.data, k, n, k, y.data + o, out);
      }
    }
  });
}

}  // namespace

void CpuMatMul(const CpuOpContext& ctx, const WeightRef& w, ConstMat x, Mat y) {
  const CpuProduct p[] = {{&w, 0, y}};
  CpuMatMulBatch(ctx, x, p);
}

void CpuParallelOverProducts(ThreadPool* pool, const std::vector<int64_t>& starts, int64_t grain,
                             const std::function<void(size_t, int64_t, int64_t)>& fn) {
  pool->ParallelFor(starts.back(), grain, [&](int64_t b0, int64_t b1) {
    // The product holding unit b0, then each product the chunk reaches.
    size_t i =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b0) - starts.begin()) -
        1;
    for (int64_t b = b0; b < b1; ++i) {
      const int64_t end = std::min(b1, starts[i + 1]);
      if (end > b) fn(i, b - starts[i], end - starts[i]);
      b = end;
    }
  });
}

void CpuMatMulBatch(const CpuOpContext& ctx, ConstMat x, std::span<const CpuProduct> products) {
  auto same_kind = [](const CpuProduct& a, const CpuProduct& b) {
    return a.w->type == b.w->type && a.w->cols == b.w->cols && a.y.rows == b.y.rows;
  };
  // Runs of consecutive products of one kind.
  for (size_t first = 0, last = 0; first < products.size(); first = last) {
    last = first + 1;
    while (last < products.size() && same_kind(products[first], products[last])) ++last;
    const std::span<const CpuProduct> run = products.subspan(first, last - first);
    const CpuProduct& p = run.front();
    if (p.y.rows == 0) continue;
    const DType vec_dot = Traits(p.w->type).vec_dot;
    if (vec_dot == DType::kQ8_0) {
      CpuQuantMatMulBatch(ctx, x, run);
    } else if (vec_dot == DType::kQ8_K) {
      CpuKQuantMatMulBatch(ctx, x, run);
    } else {
      for (const CpuProduct& f : run) {
        if (f.w->rows > 0) CpuFloatMatMul(ctx, *f.w, x.RowRange(f.row0, f.y.rows), f.y);
      }
    }
  }
}

}  // namespace odmoe
