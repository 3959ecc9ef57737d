// The CUDA backend: every op of Backend on one GPU, with activations and
// weights in device memory.
//
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, CreateBackend("cuda:0"));
//   ODMOE_ASSIGN_OR_RETURN(BackendWeight w, be->LoadWeight(view));   // uploads
//   be->MatMul(w.ref, x, y);                                         // queued
//   ODMOE_RETURN_IF_ERROR(be->CopyToHost(host, y.data, bytes));      // waits
//
// Names and options: cuda_backend_options.h ("cuda", "cuda:N",
// "cuda:N:cublas"). On a machine without a usable GPU (no driver, no device:
// cudaGetDeviceCount fails) Create returns UNAVAILABLE with CUDA's reason and
// the registry lists no "cuda:N" backend; nothing falls back on its own.
//
// Execution. Ops are queued in order on one non-blocking stream of the
// device and return at once; CopyToHost and Synchronize wait for them.
// CopyToBackend waits until the copy is done, so the caller may reuse its
// buffer at once (this includes a sync of the stream). Ops may be issued
// from any thread (each entry point makes the backend's device current on
// the calling thread) but not from two threads at once.
//
// Errors. The ops return nothing; the first failure (a launch error, a
// cuBLAS error, scratch memory that cannot be allocated, a weight below its
// type's alignment: F32 4 bytes, MXFP4 1, every other type 2) is kept, later
// ops are skipped, and the next CopyToBackend / CopyToHost / Synchronize
// returns it, as does every one after it: a failed backend stays failed
// (CUDA faults poison the context).
//
// Memory. Allocate() and LoadWeight() use cudaMalloc. The backend keeps one
// grow-only scratch buffer (Q8_0 / Q8_K activations, attention scores, the
// F32 chunks of kCublasDequantized), a 32 MiB cuBLAS workspace and small
// RoPE frequency tables (one per RopeTableKey): after the first calls with
// the largest shapes nothing is allocated on the hot path.
//
// ---- Numerics ---------------------------------------------------------------
// Weight types: F32, F16, BF16, the block32 types (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, IQ4_NL, MXFP4) and the K family (Q2_K .. Q6_K, IQ4_XS); not Q8_K.
// The kernels compute the CPU backend's canonical order (cpu_backend.h) with
// the shared building blocks of cuda_numerics*.h: 16 threads per output
// element play the 16 lanes (lane l takes elements, blocks or super-blocks
// l, l + 16, ...; quantized MatMul gives a row a warp and splits only the
// exact integer work between its halves) and the shuffle tree is the fixed
// lane tree; block32
// MatMul quantizes activations to Q8_0 with the same per-block code as
// QuantizeRow and takes exact dp4a integer block sums; K-family MatMul
// quantizes them to Q8_K on the device and takes exact int32 sub-block sums.
// Products and sums are never fused (--fmad=false), exp is the CPU's ExpF,
// division and sqrt are IEEE. So MatMul (every weight type, float weights
// under FloatMatMulPolicy::kExact), GetRows, RmsNorm, Attention (with its
// sinks, sliding window and V head size: cuda_numerics' AttentionMax /
// AttentionDenominator / AttentionFirstRow), Softmax, RouterTopK, AddBias,
// Sigmoid, SwiGlu, SwiGluOai, Add, Copy, GatherRows and ScatterAddScaled give
// the CPU backend's bits, and every op keeps backend.h's row-independence.
// RoPE uses the CPU's frequency table (backend/rope.h's
// RopeInverseFrequencies, plain or YaRN, computed on the host) and its
// cos / sin times the attention factor in double (RopeCosSin), but evaluates
// cos and sin with CUDA's libdevice rather than glibc (a few ulp in double
// apart), so rarely an element differs from the CPU in the last bit of its
// f32. (The block32 and K-family kernels have so far been
// checked by the host-compiled numerics tests only: docs/cuda.md.)
// Under FloatMatMulPolicy::kCublas, float-weight products of >= 32 rows go
// to cublasSgemm with the default math mode (full F32, no TF32) and a fixed
// workspace: deterministic from run to run, not bit-equal to the CPU, and
// not independent of the number of rows (cuda_backend_options.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "backend/backend.h"
#include "cuda_backend_options.h"
#include "cuda_kernels.h"
#include "cuda_resources.h"
#include "matmul_plan.h"
#include "norm_quant_cache.h"

namespace odmoe {

class CudaBackend final : public Backend {
 public:
  /// UNAVAILABLE when there is no usable GPU or no device `options.device`.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return CudaBackendName(options_); }
  bool host_memory() const override { return false; }

  absl::StatusOr<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override;
  absl::Status CopyToBackend(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::StatusOr<BackendWeight> LoadWeight(const TensorView& host) override;
  absl::Status Synchronize() override;

  void MatMul(const WeightRef& w, ConstMat x, Mat y) override;
  void MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) override;
  void SwiGluMatMul(const WeightRef& w, Mat gate, ConstMat up, Mat y) override;
  void GetRows(const WeightRef& table, const int32_t* ids, Mat out) override;
  void RmsNorm(ConstMat x, const float* weight, float eps, Mat y) override;
  void AddRmsNorm(Mat x, ConstMat a, const float* weight, float eps, Mat y) override;
  void Rope(Mat x, int head_dim, const int32_t* positions, const RopeParams& rope) override;
  void RopePair(Mat a, Mat b, int head_dim, const int32_t* positions,
                const RopeParams& rope) override;
  void Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head, int n_head_kv,
                 int head_dim, int pos0, float scale, const AttentionOptions& options,
                 Mat out) override;
  void Softmax(Mat x) override;
  void RouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids,
                  float* weights) override;
  void AddBias(Mat x, const float* bias) override;
  void Sigmoid(Mat x) override;
  void SwiGlu(ConstMat gate, ConstMat up, Mat out) override;
  void SwiGluOai(ConstMat gate, ConstMat up, float alpha, float limit, Mat out) override;
  void GeGlu(ConstMat gate, ConstMat up, Mat out) override;
  void Scale(Mat x, const float* factor) override;
  void SoftCap(Mat x, float cap) override;
  void Add(ConstMat a, ConstMat b, Mat out) override;
  void Copy(ConstMat src, Mat dst) override;
  void CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col,
                   int64_t cols) override;
  void GatherRows(ConstMat src, const int32_t* idx, Mat dst) override;
  void ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) override;
  // Linear attention (cuda_delta_net.cu).
  void Mul(ConstMat a, ConstMat b, Mat out) override;
  void CausalConvSilu(ConstMat x, const float* weight, int kernel, const float* state_in,
                      float* state_out, Mat out) override;
  void GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                     const float* dt_bias, const DeltaNetParams& p, const float* state_in,
                     float* state_out, Mat out) override;
  // Mamba-2 (cuda_mamba2.cu).
  void CausalConvBiasSilu(ConstMat x, const float* weight, const float* bias, int kernel,
                          const float* state_in, float* state_out, Mat out) override;
  void Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d, const float* dt_bias,
                  const Mamba2Params& p, const float* state_in, float* state_out,
                  Mat out) override;
  void GroupRmsNormGated(ConstMat y, ConstMat z, const float* weight, int group, float eps,
                         Mat out) override;
  // Products by ids (cuda_backend_by_id.cpp): one launch per product for all
  // picked weights (a grid slice each), the ids read on the device.
  absl::StatusOr<WeightTable> MakeWeightTable(std::span<const WeightRef> entries) override;
  void MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) override;
  void MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids, ConstMat x,
                      Mat ya, Mat yb) override;
  void SwiGluMatMulById(const WeightTable& w, const int32_t* ids, Mat gate, ConstMat up,
                        Mat y) override;
  void CombineExperts(ConstMat ys, const int32_t* ids, const float* weights, int k,
                      Mat out) override;

  // ---- CUDA specifics (the expert arena and the tools use these) ----------
  int device() const { return options_.device; }
  const CudaBackendOptions& options() const { return options_; }
  /// The stream every op is queued on.
  cudaStream_t stream() const { return stream_.get(); }
  /// Makes the backend's device current on the calling thread.
  absl::Status UseDevice() const { return cuda::UseDevice(options_.device); }
  /// Bytes of the scratch buffer now (it only grows).
  size_t scratch_bytes() const { return scratch_.size(); }
  /// How many products read the quantized rows a norm kept
  /// (norm_quant_cache.h) instead of quantizing their activations.
  uint64_t norm_quant_hits() const { return norm_quant_.hits(); }

 private:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}

  /// Prepares an op: false (skip it) when the backend already failed or its
  /// device cannot be made current. Forgets the quantized rows a norm kept
  /// (the op may write them).
  bool Enter();
  /// Enter() for what cannot change the kept rows unnoticed: the copies to
  /// the host, Synchronize, and CopyToBackend, the products and RouterTopK,
  /// which call norm_quant_.DropIfWrites for each of their outputs instead.
  bool EnterKeepingNormQuant();
  /// Keeps the first error; returns whether `st` was OK.
  bool Record(absl::Status st);
  bool RecordCuda(cudaError_t err, const char* what);
  /// At least `bytes` of scratch (grows, after a sync); null after an error.
  void* Scratch(size_t bytes);
  /// `m` grown to at least `bytes` (after a sync: queued ops may still read
  /// the old buffer); null after an error. An `optional` buffer that cannot
  /// be allocated gives null without failing the backend.
  void* Grow(cuda::DeviceMemory& m, size_t bytes, const char* what, bool optional = false);
  /// Where a norm of x (plus `add`) with `weight` into y writes the
  /// quantized forms of its output that its products read
  /// (norm_quant_cache.h; maybe none, still recorded), or nullopt when its
  /// rows are not kept (they do not fit, no buffer, ODMOE_CUDA_NORM_QUANT=0).
  std::optional<cuda::NormQuantOut> NormQuantOutFor(ConstMat x, const float* add,
                                                    const float* weight, Mat y);
  /// Records that a norm with `weight` wrote q's forms of y.
  void NormFilled(const cuda::NormQuantOut& q, const float* weight, Mat y);
  /// What a RoPE frequency table depends on: dims, the bits of base, YaRN
  /// or not and, with YaRN, its factor, original context, betas, truncate.
  using RopeTableKey =
      std::tuple<int, uint32_t, bool, uint32_t, int, uint32_t, uint32_t, bool, int>;
  /// The device table RopeInverseFrequencies(rope); null after an error.
  const double* RopeTable(const RopeParams& rope);
  void CublasMatMul(const WeightRef& w, ConstMat x, Mat y, const MatMulPlan& plan);
  /// The quantized paths of MatMul: x quantized into scratch (null after an
  /// error), then the product; MatMulPair runs two products on one
  /// quantization.
  void* QuantizeActivations(const MatMulPlan& plan, ConstMat x);
  /// SwiGLU(gate, up) into gate and its quantization into scratch (null
  /// after an error): SwiGluMatMul's first kernel.
  void* QuantizeSwiGlu(const MatMulPlan& plan, Mat gate, ConstMat up);
  /// The product of quantized activations `xq` (of x's rows) by w, or with
  /// `slices` a product by ids (cuda_kernels.h; w is then the table's first
  /// entry, for its type and shape).
  void QuantizedProduct(const MatMulPlan& plan, const WeightRef& w, ConstMat x, void* xq, Mat y,
                        const cuda::ProductSlices& slices = {});
  /// The ProductSlices of a product by ids over `table` (made by this
  /// backend; else an error is recorded and false returned).
  bool SlicesOf(const WeightTable& table, const int32_t* ids, int64_t count, bool shared_x,
                cuda::ProductSlices* slices);

  CudaBackendOptions options_;
  cuda::StreamPtr stream_;
  cuda::CublasPtr cublas_;
  cuda::DeviceMemory cublas_workspace_;
  cuda::DeviceMemory scratch_;
  // The last norm's output, quantized (norm_quant_cache.h).
  bool norm_quant_enabled_ = true;
  NormQuantCache norm_quant_;
  cuda::DeviceMemory norm_quant_mem_;
  std::map<RopeTableKey, cuda::DeviceMemory> rope_tables_;
  absl::Status error_;
};

}  // namespace odmoe
