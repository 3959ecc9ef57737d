// The compute backend interface: every op the model needs, on F32
// activations, over memory that the backend owns.
//
// One interface, several implementations (CPU always; CUDA when built with
// ODMOE_CUDA). The CPU backend is the reference: every op of every backend is
// tested against it (tests/unit/backend_ops_test.cpp).
//
// Memory. Pointers passed to ops point into the backend's own memory space
// (host memory for CPU, device memory for CUDA): activations live in
// BackendBuffers from Allocate(); weights come from LoadWeight(), which on a
// host backend is a zero-copy view of the mapped model file and on a device
// backend an upload. Small host-side inputs (token ids, positions) are copied
// in with CopyToBackend().
//
// Ordering. Ops are issued in order on the backend's stream; on the CPU they
// run synchronously. CopyToHost() and Synchronize() wait for all issued work.
//
// Determinism (the cluster depends on it). Every output element of an op is a
// bitwise deterministic function of its own inputs: for MatMul, y[t][o]
// depends only on row t of x and row o of w, never on how many rows x has,
// which other rows share the call, or the number of threads. This is what lets
// the main node batch, split or regroup tokens across workers and still obtain
// exactly the single-process result. (One opt-in relaxes the row clause:
// the CUDA backend named "cuda:N:cublas" hands float-weight MatMuls of many
// rows to cuBLAS; see backends/cuda/cuda_backend_options.h.)
//
//   std::unique_ptr<Backend> be = CreateBackend("cpu").value();
//   auto x = be->Allocate(n * d * sizeof(float)).value();
//   Mat xm{static_cast<float*>(x->data()), n, d};
//   be->RmsNorm(xm, norm_w, 1e-5f, xm);
//   be->MatMul(wq, xm, qm);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/dtype.h"
#include "tensor/tensor_view.h"

namespace odmoe {

/// A row-major F32 matrix in backend memory with contiguous rows.
struct Mat {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float* Row(int64_t r) const { return data + r * cols; }
  /// Rows [first, first + count) as a matrix (no copy).
  Mat RowRange(int64_t first, int64_t count) const { return {Row(first), count, cols}; }
};

struct ConstMat {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  ConstMat() = default;
  ConstMat(const float* d, int64_t r, int64_t c) : data(d), rows(r), cols(c) {}
  // Implicit on purpose: any Mat can be passed where a ConstMat is read.
  // NOLINTNEXTLINE(google-explicit-constructor)
  ConstMat(const Mat& m) : data(m.data), rows(m.rows), cols(m.cols) {}
  const float* Row(int64_t r) const { return data + r * cols; }
  ConstMat RowRange(int64_t first, int64_t count) const { return {Row(first), count, cols}; }
};

/// A weight matrix in backend memory: `rows` rows (output features) of `cols`
/// elements (input features) of `type`, rows stored back to back.
struct WeightRef {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes() const { return RowBytes(type, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
};

/// Memory owned by a backend (freed when destroyed).
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
};

/// A weight usable by a backend, with the memory that holds it (null when the
/// weight is a zero-copy view of host memory that the caller keeps alive).
struct BackendWeight {
  WeightRef ref;
  std::unique_ptr<BackendBuffer> storage;
};

/// How RouterTopK turns the selected logits into expert weights (the
/// architecture table says which a model uses).
struct RouterGating {
  /// true: the softmax over the k selected logits (Mixtral, Qwen3-MoE,
  /// gpt-oss; equal to the softmax over all experts renormalised over the
  /// selected ones). false: the softmax over all experts, read at the selected
  /// ones, so the weights sum to less than 1 (OLMoE, Qwen2-MoE, DeepSeek-V2).
  bool normalize = true;
  /// Multiplies every weight after the above (DeepSeek's routed scaling);
  /// 1 leaves the weights untouched.
  float scale = 1.0f;
};

/// RoPE variants. kInterleaved rotates pairs (x[2i], x[2i+1]) - the "normal"
/// mode GGUF llama-family files are converted for (their Q/K weights are
/// permuted accordingly). kHalf rotates (x[i], x[i + d/2]) ("NeoX" style).
enum class RopeMode { kInterleaved, kHalf };

class Backend {
 public:
  virtual ~Backend() = default;

  /// "cpu", "cuda:0", ...
  virtual std::string name() const = 0;
  /// True when backend memory is ordinary host memory (pointers may be read
  /// and written directly by the caller).
  virtual bool host_memory() const = 0;

  // ---- Memory ------------------------------------------------------------
  /// RESOURCE_EXHAUSTED when the allocation cannot be satisfied.
  virtual absl::StatusOr<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) = 0;
  virtual absl::Status CopyToBackend(void* dst, const void* host_src, size_t bytes) = 0;
  /// Waits for all issued work, then copies.
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  /// Makes a 2-D tensor of a mapped file usable as a weight (zero copy on
  /// host backends). INVALID_ARGUMENT for an unsupported type or shape.
  virtual absl::StatusOr<BackendWeight> LoadWeight(const TensorView& host) = 0;
  /// Waits for all issued work.
  virtual absl::Status Synchronize() = 0;

  // ---- Ops (F32 activations; shapes are the caller's contract) -------------
  /// y = x * w^T: y[t][o] = sum_i w[o][i] * x[t][i], fp32 accumulation.
  /// x: [n, w.cols], y: [n, w.rows]; y must not alias x.
  /// Q8_0 / Q4_0 weights: as the GGUF engines do, each row of x is first
  /// quantized to Q8_0 blocks (QuantizeRow of tensor/quant.h, per row, so the
  /// result still depends on row t alone) and the products are taken as exact
  /// integer dot products per 32-element block, each scaled by the two block
  /// scales; x[t][i] above is then the Q8_0-rounded activation. (A NaN in a
  /// row of x does not propagate through this quantization.)
  virtual void MatMul(const WeightRef& w, ConstMat x, Mat y) = 0;

  /// out[i] = dequantized row ids[i] of `table` (embedding lookup).
  /// ids: `out.rows` int32 in backend memory, each < table.rows (caller checks).
  virtual void GetRows(const WeightRef& table, const int32_t* ids, Mat out) = 0;

  /// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight; weight: x.cols floats.
  /// y may alias x.
  virtual void RmsNorm(ConstMat x, const float* weight, float eps, Mat y) = 0;

  /// Rotary position embedding in place. x: [n, n_heads * head_dim]; the first
  /// `rope_dims` dims of each head rotate by positions[t] * base^(-2i/rope_dims).
  /// positions: n int32 in backend memory.
  virtual void Rope(Mat x, int head_dim, int rope_dims, const int32_t* positions, float freq_base,
                    RopeMode mode) = 0;

  /// Causal attention of `q` rows over a KV cache. q, out: [n, n_head*head_dim];
  /// k_cache, v_cache: [capacity, n_head_kv*head_dim] with rows already written
  /// for positions [0, pos0 + n). Row t of q is at position pos0 + t and sees
  /// cache rows [0, pos0 + t]. Query head h uses KV head h / (n_head/n_head_kv).
  /// scores = q.k * scale, softmax in fp32, out = sum p * v.
  virtual void Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head, int n_head_kv,
                         int head_dim, int pos0, float scale, Mat out) = 0;

  /// Row-wise softmax in place.
  virtual void Softmax(Mat x) = 0;

  /// MoE routing. For each row of `logits` ([n, n_expert]): the k largest
  /// logits (ties: lower expert id first), in descending order, to ids[t*k+j];
  /// weights[t*k+j] as `gating` says: e_j = ExpF(l_j - l_max);
  /// normalize: w_j = e_j / (sum of the k selected e, in selection order);
  /// otherwise w_j = e_j / (sum of all n_expert e, in expert order); then
  /// w_j = w_j * scale when scale != 1.
  virtual void RouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids,
                          float* weights) = 0;

  /// x[t] += bias for every row (bias: x.cols floats in backend memory).
  virtual void AddBias(Mat x, const float* bias) = 0;

  /// x = 1 / (1 + ExpF(-x)), elementwise, in place.
  virtual void Sigmoid(Mat x) = 0;

  /// out = silu(gate) * up, elementwise; out may alias either input.
  virtual void SwiGlu(ConstMat gate, ConstMat up, Mat out) = 0;

  /// out = a + b, elementwise; out may alias either input.
  virtual void Add(ConstMat a, ConstMat b, Mat out) = 0;

  /// dst = src (same shape; the regions must not overlap).
  virtual void Copy(ConstMat src, Mat dst) = 0;

  /// dst[i] = src[idx[i]] for i < dst.rows. idx in backend memory.
  virtual void GatherRows(ConstMat src, const int32_t* idx, Mat dst) = 0;

  /// dst[idx[i]] += scale[i] * src[i] for i < src.rows, applied in order of i
  /// (so repeated indices accumulate deterministically). idx, scale in backend memory.
  virtual void ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) = 0;
};

}  // namespace odmoe
