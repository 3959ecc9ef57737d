// The CUDA backend's kernel launchers (internal; CudaBackend calls them).
//
// Each launcher queues its kernel(s) on `stream` and returns the launch
// status (cudaGetLastError); none waits for the GPU or allocates memory:
// scratch space is passed in by the caller. All pointers are device memory;
// matrices are row-major with contiguous rows, as Mat in backend/backend.h.
// The numerics are those of cuda_numerics.h (the CPU backend's canonical
// order), so every launcher computes each output element from its own
// inputs only, independent of how many rows a call has.
//
//   QActBlock* codes = ...;  float* scales = ...;   // n * (k / 32) each
//   LaunchQuantizeQ8_0(stream, x, n, k, codes, scales);
//   LaunchQuantMatMul(stream, DType::kQ4_0, w, out, k, codes, scales, n, y);
//   QActSuperBlock* xq = ...;                        // n * (k / 256)
//   LaunchQuantizeQ8_K(stream, x, n, k, xq);
//   LaunchKQuantMatMul(stream, DType::kQ4_K, w, out, k, xq, n, y);
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/backend.h"
#include "cuda_numerics_block32.h"
#include "cuda_numerics_kquant.h"
#include "tensor/dtype.h"

namespace odmoe::cuda {

using cuda_numerics::QActBlock;
using cuda_numerics::QActSuperBlock;

// ---- Products by ids (Backend::MatMulById) ----------------------------------

/// The slices of a product by ids: slice z (z < count) multiplies weight
/// table[ids[z]] (the device addresses of `entries` weights of one type and
/// shape) by activation row z (row 0 of every slice when shared_x) into
/// output row z, with exactly the operations of the plain product of that
/// weight and row. A slice whose id is outside [0, entries) writes NaN. The
/// default (table null) is a plain product of the weight the launcher is
/// given. `align`: a power of two dividing every entry's address (the
/// K-family decode kernel needs 16 for 2-byte aligned types). With table_b
/// (a pair: two tables of one type and shape, the same ids and activations)
/// slices count .. 2 * count - 1 are the second product's, into y_b. A
/// plain product with w_b (MatMulPair of two weights of one type and shape)
/// is two slices: slice 1 multiplies w_b by the same rows into y_b.
struct ProductSlices {
  const void* const* table = nullptr;
  const int32_t* ids = nullptr;
  int32_t entries = 0;
  int64_t count = 1;
  bool shared_x = false;
  int64_t align = 1;
  const void* const* table_b = nullptr;
  float* y_b = nullptr;
  const void* w_b = nullptr;
  /// The slice of a launch's blockIdx.z 0 (set by the launchers: a grid
  /// holds at most 65535 slices).
  int64_t first = 0;
};

// ---- MatMul (cuda_matmul.cu) ---------------------------------------------

/// y[n, out] = x[n, k] * w^T for F32 / F16 / BF16 weights, in the canonical
/// order (bit-identical to CpuBackend).
/// With `slices` (n == 1): a product by ids, w unused.
cudaError_t LaunchFloatMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const float* x, int64_t n, float* y,
                              const ProductSlices& slices = {});

/// Quantizes each row of x[n, k] (k a multiple of 32) to Q8_0 blocks as
/// tensor/quant.h's QuantizeRow: codes[t * k/32 + b], scales likewise (the
/// decoded f16 scale).
cudaError_t LaunchQuantizeQ8_0(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActBlock* codes, float* scales);

/// LaunchQuantizeQ8_0 of SwiGLU(gate, up) (n x k each), formed element by
/// element as LaunchSwiGlu does and stored back into gate.
cudaError_t LaunchQuantizeQ8_0SwiGlu(cudaStream_t stream, float* gate, const float* up, int64_t n,
                                     int64_t k, QActBlock* codes, float* scales);

/// y[n, out] = x * w^T for block32 weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
/// IQ4_NL, MXFP4) from activations quantized by LaunchQuantizeQ8_0 (exact
/// integer block dots, canonical float steps). The weight rows must start at
/// even addresses (MXFP4: any address).
/// With `slices` (n == 1): a product by ids, w unused.
cudaError_t LaunchQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                              int64_t k, const QActBlock* codes, const float* scales, int64_t n,
                              float* y, const ProductSlices& slices = {});

// ---- MatMul with K-family weights (cuda_matmul_k.cu) -------------------------

/// Quantizes each row of x[n, k] (k a multiple of 256) to Q8_K super-blocks
/// as tensor/quant.h's QuantizeRow: xq[t * k/256 + s].
cudaError_t LaunchQuantizeQ8_K(cudaStream_t stream, const float* x, int64_t n, int64_t k,
                               QActSuperBlock* xq);

/// LaunchQuantizeQ8_K of SwiGLU(gate, up), stored back into gate as above.
cudaError_t LaunchQuantizeQ8_KSwiGlu(cudaStream_t stream, float* gate, const float* up, int64_t n,
                                     int64_t k, QActSuperBlock* xq);

/// y[n, out] = x * w^T for Q2_K .. Q6_K and IQ4_XS weights from activations
/// quantized by LaunchQuantizeQ8_K (cpu_backend.h steps B-D). The weight
/// rows must start at even addresses.
/// With `slices` (n == 1): a product by ids, w unused.
cudaError_t LaunchKQuantMatMul(cudaStream_t stream, DType type, const void* w, int64_t out,
                               int64_t k, const QActSuperBlock* xq, int64_t n, float* y,
                               const ProductSlices& slices = {});

/// out[r, k] = dequantized weight rows [first, first + rows) (any type).
cudaError_t LaunchDequantRows(cudaStream_t stream, DType type, const void* w, int64_t k,
                              int64_t first, int64_t rows, float* out);

// ---- Row ops (cuda_ops.cu) -----------------------------------------------

/// out[i] = dequantized row ids[i] of `table` (cols elements each).
cudaError_t LaunchGetRows(cudaStream_t stream, DType type, const void* table, int64_t cols,
                          const int32_t* ids, int64_t n, float* out);

/// Where a norm also writes its output's quantizations (null: that form not):
/// y's rows as LaunchQuantizeQ8_K gives them (rows * cols / 256 super-blocks)
/// and as LaunchQuantizeQ8_0 gives them (rows * cols / 32 codes and scales),
/// bit for bit.
struct NormQuantOut {
  QActSuperBlock* q8k = nullptr;
  QActBlock* q8_0_codes = nullptr;
  float* q8_0_scales = nullptr;
};
/// Whether a norm of x into y (after adding `add`, when not null) with
/// `weight` can take a NormQuantOut: rows of a multiple of 256 floats that
/// fit the shared-memory stage, every pointer 16-byte aligned.
bool RmsNormCanQuantize(ConstMat x, const float* add, const float* weight, Mat y);
/// Backend::RmsNorm; with q's pointers set (RmsNormCanQuantize must hold,
/// else cudaErrorInvalidValue) the output's quantizations too.
cudaError_t LaunchRmsNorm(cudaStream_t stream, ConstMat x, const float* weight, float eps, Mat y,
                          const NormQuantOut& q = {});
/// Backend::AddRmsNorm: x = x + a (AddKernel's bits), then RmsNorm(x) into y
/// (and q as LaunchRmsNorm).
cudaError_t LaunchAddRmsNorm(cudaStream_t stream, Mat x, ConstMat a, const float* weight,
                             float eps, Mat y, const NormQuantOut& q = {});
/// Backend::Rope; inv_freq: rope.dims / 2 doubles in device memory,
/// RopeInverseFrequencies(rope) (backend/rope.h).
cudaError_t LaunchRope(cudaStream_t stream, Mat x, int head_dim, const int32_t* positions,
                       const double* inv_freq, const RopeParams& rope);
/// Backend::RopePair: a's and b's rows (same row count, positions) in one launch.
cudaError_t LaunchRopePair(cudaStream_t stream, Mat a, Mat b, int head_dim,
                           const int32_t* positions, const double* inv_freq,
                           const RopeParams& rope);
cudaError_t LaunchSoftmax(cudaStream_t stream, Mat x);
cudaError_t LaunchRouterTopK(cudaStream_t stream, ConstMat logits, int k, RouterGating gating,
                             int32_t* ids, float* weights);
/// x[t] += bias (x.cols floats), every row.
cudaError_t LaunchAddBias(cudaStream_t stream, Mat x, const float* bias);
/// x = 1 / (1 + ExpF(-x)) in place.
cudaError_t LaunchSigmoid(cudaStream_t stream, Mat x);
cudaError_t LaunchSwiGlu(cudaStream_t stream, ConstMat gate, ConstMat up, Mat out);
/// Backend::SwiGluOai (cuda_numerics::SwiGluOai per element).
cudaError_t LaunchSwiGluOai(cudaStream_t stream, ConstMat gate, ConstMat up, float alpha,
                            float limit, Mat out);
/// Backend::GeGlu (cuda_numerics::GeGlu per element).
cudaError_t LaunchGeGlu(cudaStream_t stream, ConstMat gate, ConstMat up, Mat out);
/// x = x * factor[0] in place (factor in device memory).
cudaError_t LaunchScale(cudaStream_t stream, Mat x, const float* factor);
/// x = cap * TanhF(x / cap) in place.
cudaError_t LaunchSoftCap(cudaStream_t stream, Mat x, float cap);
cudaError_t LaunchAdd(cudaStream_t stream, ConstMat a, ConstMat b, Mat out);
// Linear attention (cuda_delta_net.cu): Backend::Mul, CausalConvSilu (at
// most 8 taps) and GatedDeltaNet, the CPU backend's bits.
cudaError_t LaunchMul(cudaStream_t stream, ConstMat a, ConstMat b, Mat out);
cudaError_t LaunchCausalConvSilu(cudaStream_t stream, ConstMat x, const float* weight, int kernel,
                                 const float* state_in, float* state_out, Mat out);
cudaError_t LaunchGatedDeltaNet(cudaStream_t stream, ConstMat qkv, ConstMat alpha, ConstMat beta,
                                const float* a, const float* dt_bias, const DeltaNetParams& p,
                                const float* state_in, float* state_out, Mat out);
// Mamba-2 (cuda_mamba2.cu): Backend::CausalConvBiasSilu (at most 8 taps;
// a null bias: CausalConvSilu's kernel),
// Mamba2Scan and GroupRmsNormGated, the CPU backend's bits.
cudaError_t LaunchCausalConvBiasSilu(cudaStream_t stream, ConstMat x, const float* weight,
                                     const float* bias, int kernel, const float* state_in,
                                     float* state_out, Mat out);
cudaError_t LaunchMamba2Scan(cudaStream_t stream, ConstMat xbc, ConstMat dt, const float* a,
                             const float* d, const float* dt_bias, const Mamba2Params& p,
                             const float* state_in, float* state_out, Mat out);
cudaError_t LaunchGroupRmsNormGated(cudaStream_t stream, ConstMat y, ConstMat z,
                                    const float* weight, int group, float eps, Mat out);
cudaError_t LaunchGatherRows(cudaStream_t stream, ConstMat src, const int32_t* idx, Mat dst);
cudaError_t LaunchScatterAddScaled(cudaStream_t stream, ConstMat src, const int32_t* idx,
                                   const float* scale, Mat dst);
/// Backend::CombineExperts (ids, weights: out.rows * k each).
cudaError_t LaunchCombineExperts(cudaStream_t stream, ConstMat ys, const int32_t* ids,
                                 const float* weights, int k, Mat out);

// ---- Attention (cuda_attention.cu) ---------------------------------------

/// Scratch floats LaunchAttention needs for these shapes (it processes as
/// many query rows at once as `max_scratch_floats` allows, at least one).
int64_t AttentionScratchFloats(int64_t n, int n_head, int pos0, int64_t max_scratch_floats);

/// Causal attention as Backend::Attention (options.sinks in device memory);
/// `scratch` holds AttentionScratchFloats(...) floats.
cudaError_t LaunchAttention(cudaStream_t stream, ConstMat q, ConstMat k_cache, ConstMat v_cache,
                            int n_head, int n_head_kv, int head_dim, int pos0, float scale,
                            const AttentionOptions& options, Mat out, float* scratch,
                            int64_t scratch_floats);

}  // namespace odmoe::cuda
