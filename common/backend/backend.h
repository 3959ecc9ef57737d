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
//   RopeParams rope;
//   rope.dims = head_dim;
//   be->Rope(qm, head_dim, positions, rope);
//   be->Attention(qm, k_cache, v_cache, n_head, n_head_kv, head_dim, pos0, scale,
//                 AttentionOptions{}, attn);
//   // A MoE layer with its routing left in backend memory (ids, weights: [k]):
//   WeightTable gate = be->MakeWeightTable(gates).value();   // ... up, down alike
//   be->MatMulPairById(gate, up, ids, h, g, u);              // g, u: [k, n_ff]
//   be->SwiGluMatMulById(down, ids, g, u, ys);               // ys: [k, n_embd]
//   be->CombineExperts(ys, ids, weights, k, moe);            // ascending expert id
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/logit_scores.h"
#include "backend/rope.h"
#include "tensor/dtype.h"
#include "tensor/tensor_view.h"
#include "util/status_macros.h"

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

/// How a weight's bytes are ordered in backend memory. kRows is the file's
/// order, the only one outside a backend; a backend may keep the weights it
/// loads (LoadWeight) in a layout of its own, with the same bytes moved.
enum class WeightLayout : uint8_t {
  kRows,
  /// The CPU backend's K-family decode layout: each group of 16 rows has its
  /// super-blocks' 4-byte words interleaved (cpu_kquant.h, "Interleaved
  /// rows"); rows past the last whole group stay in kRows order after them.
  kInterleaved16,
};

/// A weight matrix in backend memory: `rows` rows (output features) of `cols`
/// elements (input features) of `type`, rows stored back to back (in the
/// order `layout` says; the size is row_bytes() * rows either way).
struct WeightRef {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  WeightLayout layout = WeightLayout::kRows;
  size_t row_bytes() const { return RowBytes(type, cols); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(rows); }
  /// Whether `o` has this weight's type, shape and layout.
  bool SameShapeAs(const WeightRef& o) const {
    return type == o.type && rows == o.rows && cols == o.cols && layout == o.layout;
  }
};

/// Memory owned by a backend (freed when destroyed).
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
};

class Backend;

/// Weights of one type, shape and layout that ops pick from by ids held in
/// backend memory (one layer's experts' gate matrices: Backend::MatMulById),
/// made by Backend::MakeWeightTable. The entries' memory must outlive it.
struct WeightTable {
  std::vector<WeightRef> entries;
  /// The backend's own index of the entries (the CUDA backend: their device
  /// addresses, read by its kernels); null where the backend needs none.
  std::unique_ptr<BackendBuffer> index;
  /// The backend that made it: the only one whose ops may read it (the
  /// entries are in that backend's memory).
  const Backend* owner = nullptr;
  int32_t size() const { return static_cast<int32_t>(entries.size()); }
  /// The shape every entry has.
  const WeightRef& first() const { return entries.front(); }
};

/// A weight usable by a backend, with the memory that holds it (null when the
/// weight is a zero-copy view of host memory that the caller keeps alive).
struct BackendWeight {
  WeightRef ref;
  std::unique_ptr<BackendBuffer> storage;
};

/// How the router scores each expert from its logit (GGUF
/// `<arch>.expert_gating_func`: 1 softmax, 2 sigmoid).
enum class RouterScore {
  kSoftmax,  // the softmax over the experts (Mixtral ... DeepSeek-V2)
  kSigmoid,  // sigmoid(l) per expert (DeepSeek-V3, GLM-4.5, MiniMax-M2)
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

  // DeepSeek-V3's routing (score kSigmoid only; the softmax rule ignores the
  // fields below): experts are chosen on s_e + selection_bias[e] with
  // s_e = sigmoid(l_e), among the n_group_used best of n_group equal groups
  // of consecutive experts (a group ranked by the sum of its two largest
  // biased scores); an expert's weight is its unbiased s_e (normalize: over
  // the sum of the k chosen), times scale.
  RouterScore score = RouterScore::kSoftmax;
  int n_group = 1;       // groups of n_expert / n_group experts (>= 2 each when limited)
  int n_group_used = 1;  // groups kept per row; n_group_used >= n_group: no limit
  /// The layer's correction bias (n_expert floats in backend memory, the
  /// caller's per call: GGUF blk.N.exp_probs_b.bias); null: none.
  const float* selection_bias = nullptr;
  /// True when rows choose among some groups only.
  bool group_limited() const { return n_group > 1 && n_group_used < n_group; }
};

/// Options of Backend::Attention; the defaults are plain causal attention
/// over every cached position with V heads as wide as K heads.
struct AttentionOptions {
  /// Per query head one learned logit that joins the softmax denominator and
  /// is then dropped (gpt-oss's "sinks"): n_head floats in backend memory;
  /// null: none.
  const float* sinks = nullptr;
  /// > 0: a query at position p sees only the keys at positions
  /// (p - window, p], i.e. the last `window` ones including itself
  /// (transformers' sliding_window); 0: every position in [0, p].
  int window = 0;
  /// Elements per V head, and per head of the output; 0: head_dim (the K /
  /// Q head size). DeepSeek-V2: 192-wide K heads, 128-wide V heads.
  int v_head_dim = 0;
};

/// Gated DeltaNet's head shapes for Backend::GatedDeltaNet (Qwen3-Next,
/// Qwen3.5; model_config.h's DeltaNetShape). A row of its `qkv` input holds
/// q (n_k_heads x head_k), k (the same) and v (n_v_heads x head_v).
struct DeltaNetParams {
  int n_k_heads = 0;
  int n_v_heads = 0;  // a multiple of n_k_heads
  int head_k = 0;
  int head_v = 0;
  /// Which key head value head j reads: j % n_k_heads (true), or
  /// j / (n_v_heads / n_k_heads) (false).
  bool v_heads_tiled = false;
  float l2_eps = 1e-6f;  // q and k are divided by sqrt(sum of squares + l2_eps)
  int key_head_of(int j) const {
    return v_heads_tiled ? j % n_k_heads : j / (n_v_heads / n_k_heads);
  }
  int64_t state_floats() const { return int64_t{n_v_heads} * head_v * head_k; }
};

/// Mamba-2's shapes for Backend::Mamba2Scan (Nemotron-H; model_config.h's
/// Mamba2Shape). A row of its `xbc` input holds x (n_heads x head_dim), B
/// (n_groups x state) and C (the same); head h reads group
/// h / (n_heads / n_groups).
struct Mamba2Params {
  int n_heads = 0;
  int head_dim = 0;
  int n_groups = 0;  // divides n_heads
  int state = 0;
  int group_of(int h) const { return h / (n_heads / n_groups); }
  int64_t inner() const { return int64_t{n_heads} * head_dim; }
  int64_t state_floats() const { return inner() * state; }
};

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
  /// The layout this backend computes a `rows` x `cols` weight of `type` in
  /// when the caller fills its memory itself (a worker's expert slots on a
  /// host backend): kRows unless the backend has a faster one.
  virtual WeightLayout SlotLayout(DType type, int64_t rows, int64_t cols) const {
    (void)type, (void)rows, (void)cols;
    return WeightLayout::kRows;
  }
  /// Writes the bytes of a 2-D host tensor (view.bytes()) to host memory at
  /// `dst` in `layout`, one SlotLayout gave for it; kRows is a plain copy.
  virtual void ArrangeWeight(const TensorView& view, WeightLayout layout, void* dst) const {
    (void)layout;
    std::memcpy(dst, view.data, view.bytes());
  }
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

  /// ya = x * a^T, then yb = x * b^T: exactly the bits of MatMul(a, x, ya)
  /// followed by MatMul(b, x, yb) (two products of one input: k and v,
  /// an expert's gate and up). A backend may share work between them (the
  /// CUDA backend quantizes x once when both weights take the same activation
  /// type). ya must not overlap x.
  virtual void MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) {
    MatMul(a, x, ya);
    MatMul(b, x, yb);
  }

  /// gate = SwiGlu(gate, up), then y = gate * w^T: exactly SwiGlu(gate, up,
  /// gate) followed by MatMul(w, gate, y) (an expert's activation and down
  /// product). A backend may fuse the two (the CUDA backend forms the
  /// activation inside the activation quantization: one kernel fewer).
  virtual void SwiGluMatMul(const WeightRef& w, Mat gate, ConstMat up, Mat y) {
    SwiGlu(gate, up, gate);
    MatMul(w, gate, y);
  }

  /// out[i] = dequantized row ids[i] of `table` (embedding lookup).
  /// ids: `out.rows` int32 in backend memory, each < table.rows (caller checks).
  virtual void GetRows(const WeightRef& table, const int32_t* ids, Mat out) = 0;

  /// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight; weight: x.cols floats.
  /// y may alias x.
  virtual void RmsNorm(ConstMat x, const float* weight, float eps, Mat y) = 0;

  /// x = x + a (Add's bits), then y = RmsNorm(x): the residual add that ends
  /// a block fused with the norm that starts the next. x, a, y: one shape;
  /// y must not overlap x or a. A backend may do both in one pass (the CUDA
  /// backend: one kernel).
  virtual void AddRmsNorm(Mat x, ConstMat a, const float* weight, float eps, Mat y);

  /// Rotary position embedding in place. x: [n, n_heads * head_dim]; dims
  /// [rope.offset, rope.offset + rope.dims) of each head rotate: pair i by
  /// theta = positions[t] * inv_freq_i (RopeInverseFrequencies of rope.h:
  /// base^(-2i/dims), or its YaRN blend), with c = cos(theta) * f and
  /// s = sin(theta) * f, f = RopeAttentionFactor(rope) (1 without scaling):
  /// (a, b) -> (a*c - b*s, a*s + b*c). positions: n int32 in backend memory.
  virtual void Rope(Mat x, int head_dim, const int32_t* positions, const RopeParams& rope) = 0;

  /// Rope(a, ...), then Rope(b, ...) with the same positions and parameters
  /// (q and k: a.rows == b.rows; the head counts may differ): the bits of the
  /// two calls (a backend may rotate both in one pass; the CUDA backend: one
  /// kernel). a and b must not overlap.
  virtual void RopePair(Mat a, Mat b, int head_dim, const int32_t* positions,
                        const RopeParams& rope);

  /// Causal attention of `q` rows over a KV cache. q: [n, n_head*head_dim];
  /// k_cache: [capacity, n_head_kv*head_dim], rows already written for
  /// positions [0, pos0 + n); v_cache: `capacity` rows whose first
  /// n_head_kv*vd floats are the V heads (vd = options.v_head_dim or
  /// head_dim; v_cache.cols is the row stride and may be larger, so V may be
  /// a prefix of each K row, as in MLA's compressed cache); out:
  /// [n, n_head*vd]. Row t of q is at position p = pos0 + t and sees cache
  /// rows [first, p], first = max(0, p - window + 1) with a window, else 0.
  /// Query head h uses KV head h / (n_head/n_head_kv).
  /// s_j = q.k_j * scale; with a sink z_h: softmax over {s_j} and z_h with
  /// the z_h term dropped from the output; out = sum_j p_j * v_j.
  virtual void Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head, int n_head_kv,
                         int head_dim, int pos0, float scale, const AttentionOptions& options,
                         Mat out) = 0;

  /// Row-wise softmax in place.
  virtual void Softmax(Mat x) = 0;

  /// Teacher-forced scores of rows of logits: out[r] = ScoreLogitRow(row r,
  /// logits.cols, targets[r]) of backend/logit_scores.h, the same bits on
  /// every backend. `targets` and `out` are host memory ([logits.rows]), the
  /// logits backend memory; waits for the work issued before. This default
  /// reads the rows on the host (copied there in one piece where the
  /// backend's memory is not the host's).
  virtual absl::Status ScoreLogitRows(ConstMat logits, const int32_t* targets,
                                      LogitRowScore* out) {
    return ScoreLogitRowsOnHost(logits, targets, out, /*copy=*/!host_memory());
  }
  /// ScoreLogitRows' default: the rows scored on the calling thread, read in
  /// place or (`copy`) after one CopyToHost of them all.
  absl::Status ScoreLogitRowsOnHost(ConstMat logits, const int32_t* targets, LogitRowScore* out,
                                    bool copy);

  /// MoE routing. For each row of `logits` ([n, n_expert]): the k largest
  /// logits (ties: lower expert id first), in descending order, to ids[t*k+j];
  /// weights[t*k+j] as `gating` says: e_j = ExpF(l_j - l_max);
  /// normalize: w_j = e_j / (sum of the k selected e, in selection order);
  /// otherwise w_j = e_j / (sum of all n_expert e, in expert order); then
  /// w_j = w_j * scale when scale != 1.
  /// gating.score == kSigmoid: s_e = 1 / (1 + ExpF(-l_e)), b_e = s_e +
  /// selection_bias[e] (s_e without a bias); when group_limited(), group g's
  /// rank is the sum of its two largest b (larger + smaller), the
  /// n_group_used largest ranks are kept (ties: lower group) and the b of the
  /// other groups' experts count as -inf; the k largest b are chosen (ties:
  /// lower id); w_j = s of the chosen, ordered by descending w (ties: lower
  /// id); normalize: w_j = w_j / (sum of the k w in that order + 1e-20f);
  /// then w_j * scale when scale != 1. In every case ids[t*k..] are in
  /// descending weight.
  virtual void RouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids,
                          float* weights) = 0;

  /// x[t] += bias for every row (bias: x.cols floats in backend memory).
  virtual void AddBias(Mat x, const float* bias) = 0;

  /// x = 1 / (1 + ExpF(-x)), elementwise, in place.
  virtual void Sigmoid(Mat x) = 0;

  /// out = silu(gate) * up, elementwise; out may alias either input.
  virtual void SwiGlu(ConstMat gate, ConstMat up, Mat out) = 0;

  /// gpt-oss's clamped SwiGLU, elementwise (out may alias either input):
  /// g = min(gate, limit), u = clamp(up, -limit, limit),
  /// out = g / (1 + ExpF(-(alpha * g))) * (u + 1). gpt-oss: alpha 1.702, limit 7.
  virtual void SwiGluOai(ConstMat gate, ConstMat up, float alpha, float limit, Mat out) = 0;

  /// Gemma's GeGLU, elementwise (out may alias either input):
  /// out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi)
  /// (g + 0.044715 g^3))), tanh(y) = 1 - 2 / (ExpF(2y) + 1).
  virtual void GeGlu(ConstMat gate, ConstMat up, Mat out) = 0;

  /// x = x * factor[0], elementwise, in place (factor: one float in backend
  /// memory: Gemma's embedding scale, a layer's output scale).
  virtual void Scale(Mat x, const float* factor) = 0;

  /// x = cap * tanh(x / cap), elementwise, in place (logit soft-capping;
  /// tanh as GeGlu's); cap > 0.
  virtual void SoftCap(Mat x, float cap) = 0;

  /// out = a + b, elementwise; out may alias either input.
  virtual void Add(ConstMat a, ConstMat b, Mat out) = 0;

  /// dst = src (same shape; the regions must not overlap).
  virtual void Copy(ConstMat src, Mat dst) = 0;

  /// A block of columns: dst[t][dst_col + j] = src[t][src_col + j] for
  /// t < src.rows (== dst.rows), j < cols; the rest of dst is untouched. The
  /// two matrices' cols are their row strides (MLA reads one head's slice of
  /// a row this way). The regions must not overlap.
  virtual void CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col,
                           int64_t cols) = 0;

  /// dst[i] = src[idx[i]] for i < dst.rows. idx in backend memory.
  virtual void GatherRows(ConstMat src, const int32_t* idx, Mat dst) = 0;

  /// dst[idx[i]] += scale[i] * src[i] for i < src.rows, applied in order of i
  /// (so repeated indices accumulate deterministically). idx, scale in backend memory.
  virtual void ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) = 0;

  // ---- Experts picked by ids in backend memory ------------------------------
  // A MoE layer whose routing stays where RouterTopK computed it: no copy of
  // the ids to the host, so a device backend never waits in the middle of a
  // step. Each op has exactly the bits of the plain ops it stands for.

  /// A table of `entries` (at least one; all of one type, shape and
  /// layout, each usable by this backend: LoadWeight's refs).
  /// INVALID_ARGUMENT otherwise.
  virtual absl::StatusOr<WeightTable> MakeWeightTable(std::span<const WeightRef> entries);

  /// y[j] = x[j] * table.entries[ids[j]]^T for j < y.rows, where x has y.rows
  /// rows, or one row that every j reads: exactly the bits of
  /// MatMul(table.entries[ids[j]], that row of x, row j of y). ids: y.rows
  /// int32 in backend memory, each in [0, table.size()) (the caller's
  /// contract, as RouterTopK's ids are; a row whose id is outside is left
  /// unwritten or written with NaN, never read out of bounds). y must not
  /// overlap x. This default reads the ids on the host (after a copy where
  /// the backend's memory is not the host's: a wait for the device).
  virtual void MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y);

  /// MatMulById(a, ids, x, ya), then MatMulById(b, ids, x, yb): the picked
  /// experts' gate and up products (bits of MatMulPair per row; a backend
  /// may quantize x once for all of them). ya must not overlap x. The
  /// default reads the ids on the host as MatMulById's does.
  virtual void MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids,
                              ConstMat x, Mat ya, Mat yb);

  /// gate = SwiGlu(gate, up), then MatMulById(w, ids, gate, y): the picked
  /// experts' activations and down products (gate: y.rows rows; bits of
  /// SwiGluMatMul per row). The default reads the ids on the host.
  virtual void SwiGluMatMulById(const WeightTable& w, const int32_t* ids, Mat gate, ConstMat up,
                                Mat y);

  /// The canonical combination of experts' outputs (expert_executor.h):
  /// out[t] = 0, then for each of row t's k slots j in NextExpertSlot's order
  /// (ascending expert id; backend/expert_order.h):
  /// out[t] = out[t] + weights[t*k+j] * ys[t*k+j], element by element.
  /// ys: [out.rows * k, out.cols]; ids, weights: out.rows * k each, backend
  /// memory (RouterTopK's). out must not overlap ys.
  virtual void CombineExperts(ConstMat ys, const int32_t* ids, const float* weights, int k,
                              Mat out) = 0;

  // ---- Linear attention (Gated DeltaNet: common/engine/transformer_delta_net.cpp)
  // Rows of ONE sequence, in order; each op computes a row from the state the
  // rows before it left, one row at a time, so a sequence's results do not
  // depend on how its rows are split into calls (a prefill in chunks of any
  // size and a decode of one row at a time give the same bits). The state
  // is read from `state_in` (null: zeros, a sequence's start) and the state
  // after the last row written to `state_out` (may equal state_in).

  /// out = a * b, elementwise; out may alias either input.
  virtual void Mul(ConstMat a, ConstMat b, Mat out) = 0;

  /// Causal depthwise convolution of `kernel` taps, then SiLU: with w the
  /// rows of state_in ([kernel - 1, x.cols], oldest first) followed by the
  /// rows of x, out[t][c] = silu(acc), acc = 0, then for j in [0, kernel):
  /// acc = acc + weight[c * kernel + j] * w[t + j][c]. state_out receives
  /// the last kernel - 1 rows of w. weight: x.cols * kernel floats; out must
  /// not overlap x.
  virtual void CausalConvSilu(ConstMat x, const float* weight, int kernel, const float* state_in,
                              float* state_out, Mat out) = 0;

  /// The gated delta rule. Row t of qkv holds q, k, v (DeltaNetParams); per
  /// value head j (key head kh = p.key_head_of(j)), with S_j its state
  /// (head_v rows of head_k floats, state_in / state_out: n_v_heads such
  /// matrices back to back):
  ///   q = l2norm(q_kh) / sqrt(head_k), k = l2norm(k_kh)
  ///   u = alpha[t][j] + dt_bias[j]; g = a[j] * (u > 20 ? u : log1p(exp(u)))
  ///   b = sigmoid(beta[t][j])
  ///   per row i of S_j: s = s * exp(g); d = (v[i] - dot(s, k)) * b;
  ///                     s = s + k * d; out[t][j * head_v + i] = dot(s, q)
  /// alpha, beta: [n, n_v_heads]; a (-exp(A_log)), dt_bias: n_v_heads floats;
  /// out: [n, n_v_heads * head_v].
  virtual void GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                             const float* dt_bias, const DeltaNetParams& p, const float* state_in,
                             float* state_out, Mat out) = 0;

  // Mamba-2 (Nemotron-H; cpu_mamba2.cpp, cuda_mamba2.cu).
  /// CausalConvSilu with a bias per channel added to each sum before the
  /// SiLU: out[t][c] = silu(sum_j weight[c * kernel + j] * w[t + j][c] + bias[c]).
  virtual void CausalConvBiasSilu(ConstMat x, const float* weight, const float* bias, int kernel,
                                  const float* state_in, float* state_out, Mat out) = 0;
  /// Mamba-2's selective scan. Row t of xbc holds x, B, C (Mamba2Params);
  /// per head h (group g = p.group_of(h)), with S_h its state (head_dim rows
  /// of `state` floats; state_in / state_out: n_heads such matrices back to
  /// back, state_in null: zeros):
  ///   u = dt[t][h] + dt_bias[h]; d = u > 20 ? u : log1p(exp(u)); e = exp(d * a[h])
  ///   per row i: s = s * e + B_g * (x[i] * d); out[t][h * head_dim + i] = dot(s, C_g) + D[h] * x[i]
  /// dt: [n, n_heads]; a (-exp(A_log)), D, dt_bias: n_heads floats; out: [n, inner].
  virtual void Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d,
                          const float* dt_bias, const Mamba2Params& p, const float* state_in,
                          float* state_out, Mat out) = 0;
  /// Mamba-2's gated norm: g = y * silu(z), then each group of `group`
  /// columns RMS-normalised, times weight (y.cols floats):
  ///   out[t][c] = g[c] / sqrt(mean over c's group of g^2 + eps) * weight[c].
  virtual void GroupRmsNormGated(ConstMat y, ConstMat z, const float* weight, int group, float eps,
                                 Mat out) = 0;

 protected:
  /// MakeWeightTable's check, for backends that override it.
  static absl::Status CheckWeightTableEntries(std::span<const WeightRef> entries);
  /// ScoreLogitRows' check (rows of no logits are refused), for backends
  /// that override it.
  static absl::Status CheckLogitRows(ConstMat logits);
};

}  // namespace odmoe
