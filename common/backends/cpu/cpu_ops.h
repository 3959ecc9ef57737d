// The CPU backend's op implementations (internal; CpuBackend forwards to
// these). Each takes the kernel table of the chosen ISA and the thread pool;
// work is split over output rows (or attention heads) only, never inside one
// reduction, so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "cpu_kernels.h"
#include "cpu_qdot.h"
#include "util/thread_pool.h"

namespace odmoe {

struct CpuOpContext {
  const CpuKernels* kernels;
  ThreadPool* pool;
  CpuQuantScratch* quant_scratch = nullptr;  // needed by MatMul only
};

/// True when the CPU backend computes with weights of `type` (MatMul and
/// GetRows); LoadWeight refuses the others.
bool CpuSupportsWeightType(DType type);

void CpuMatMul(const CpuOpContext& ctx, const WeightRef& w, ConstMat x, Mat y);

/// One product of a batch: rows [row0, row0 + y.rows) of the batch's
/// activations times *w, into y (y.cols == w->rows).
struct CpuProduct {
  const WeightRef* w = nullptr;
  int64_t row0 = 0;
  Mat y;
};
/// Several products of the rows of one activation matrix, each with the bits
/// of CpuMatMul(ctx, *p.w, x.RowRange(p.row0, p.y.rows), p.y): consecutive
/// quantized products of one weight type, width and row count share one
/// quantization of x and one parallel loop (an expert's gate and up, every
/// picked expert of a layer), others run one by one. No y may overlap x.
///
///   const CpuProduct ps[] = {{&gate, 0, g}, {&up, 0, u}};
///   CpuMatMulBatch(ctx, x, ps);
void CpuMatMulBatch(const CpuOpContext& ctx, ConstMat x, std::span<const CpuProduct> products);
/// CpuMatMulBatch's part for block32 weights (Q8_0 activations) and for
/// K-family weights (Q8_K activations): products of one type, width and row
/// count.
void CpuQuantMatMulBatch(const CpuOpContext& ctx, ConstMat x, std::span<const CpuProduct> products);
void CpuKQuantMatMulBatch(const CpuOpContext& ctx, ConstMat x,
                          std::span<const CpuProduct> products);
/// The batches' parallel loop: product i owns units [starts[i], starts[i +
/// 1]) of one loop over starts.back() units, and fn(i, l0, l1) runs its
/// local units [l0, l1) on the calling thread (a chunk may reach into
/// several products, and end anywhere inside one).
void CpuParallelOverProducts(ThreadPool* pool, const std::vector<int64_t>& starts, int64_t grain,
                             const std::function<void(size_t, int64_t, int64_t)>& fn);
void CpuGetRows(const CpuOpContext& ctx, const WeightRef& table, const int32_t* ids, Mat out);
void CpuRmsNorm(const CpuOpContext& ctx, ConstMat x, const float* weight, float eps, Mat y);
void CpuRope(const CpuOpContext& ctx, Mat x, int head_dim, const int32_t* positions,
             const RopeParams& rope);
void CpuAttention(const CpuOpContext& ctx, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                  int n_head, int n_head_kv, int head_dim, int pos0, float scale,
                  const AttentionOptions& options, Mat out);
void CpuSoftmax(const CpuOpContext& ctx, Mat x);
void CpuRouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids, float* weights);
void CpuSwiGlu(const CpuOpContext& ctx, ConstMat gate, ConstMat up, Mat out);
void CpuSwiGluOai(const CpuOpContext& ctx, ConstMat gate, ConstMat up, float alpha, float limit,
                  Mat out);
void CpuGeGlu(const CpuOpContext& ctx, ConstMat gate, ConstMat up, Mat out);
// Linear attention (cpu_delta_net.cpp).
void CpuMul(const CpuOpContext& ctx, ConstMat a, ConstMat b, Mat out);
void CpuCausalConvSilu(const CpuOpContext& ctx, ConstMat x, const float* weight, int kernel,
                       const float* state_in, float* state_out, Mat out);
void CpuGatedDeltaNet(const CpuOpContext& ctx, ConstMat qkv, ConstMat alpha, ConstMat beta,
                      const float* a, const float* dt_bias, const DeltaNetParams& p,
                      const float* state_in, float* state_out, Mat out);
// Mamba-2 (cpu_mamba2.cpp). CpuCausalConvBiasSilu with a null bias is
// CpuCausalConvSilu.
void CpuCausalConvBiasSilu(const CpuOpContext& ctx, ConstMat x, const float* weight,
                           const float* bias, int kernel, const float* state_in,
                           float* state_out, Mat out);
void CpuMamba2Scan(const CpuOpContext& ctx, ConstMat xbc, ConstMat dt, const float* a,
                   const float* d, const float* dt_bias, const Mamba2Params& p,
                   const float* state_in, float* state_out, Mat out);
void CpuGroupRmsNormGated(const CpuOpContext& ctx, ConstMat y, ConstMat z, const float* weight,
                          int group, float eps, Mat out);

/// Rows per parallel chunk so that a chunk has at least ~256k elements of
/// work: waking a pool thread cost tens of microseconds, more than a small op
/// (measured on the tiny model: 2-thread decode went from ~1,900 to ~3,300
/// tokens/s when ops below this size stopped waking the pool). With the
/// polling pool of session 35 a call costs about a microsecond, but 64k and
/// 16k measured no different on the tiny and OLMoE-shaped models.
inline int64_t CpuRowGrain(int64_t work_per_row) {
  constexpr int64_t kMinChunkWork = 256 * 1024;
  return work_per_row >= kMinChunkWork ? 1 : kMinChunkWork / (work_per_row > 0 ? work_per_row : 1);
}

}  // namespace odmoe
