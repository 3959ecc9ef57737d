// The CPU backend: the reference implementation of every op of Backend.
//
//   CpuBackend be(/*threads=*/2);                 // ISA from DefaultCpuIsa()
//   CpuBackend scalar(1, CpuIsa::kScalar);        // same bits, slower
//   be.MatMul(w, x, y);
//
// Memory is host memory: Allocate() returns 64-byte aligned buffers (from
// 2 MiB on, 2 MiB aligned with transparent huge pages asked for) and
// LoadWeight() is a zero-copy view of the caller's (mapped) tensor, except
// for K-family weights of 16 rows or more whose type the ISA decodes in
// KInterleave16 (cpu_kquant.h: every K-family type with AVX-512 VNNI): those are
// copied once into that layout (the same bytes, moved; WeightRef::layout
// says so), which decode reads 16 rows at a time, or, where
// InterleavedDecodePays says row order decodes faster (Q5_K / Q6_K beyond
// 2 MiB on Zen 4), copied in row order, so that they too sit on huge pages.
// ODMOE_CPU_REPACK=0 (or set_repack_weights(false)) keeps every weight a view.
// Weight types: those CpuSupportsWeightType() lists (float, block32 and K
// family); activations are F32 (quantized to Q8_0 or Q8_K inside a MatMul
// with quantized weights, see below).
//
// Threads. Ops run on the calling thread plus `threads - 1` pool workers and
// are split over output rows (MatMul: blocks of 4 weight rows; Attention:
// (head, query row) pairs) only; the activation quantization of a quantized
// MatMul is split over rows of x. No reduction is ever split, so no result
// depends on the thread count. Ops must not be issued concurrently on one
// CpuBackend from several threads (the pool serialises them anyway).
//
// ---- The canonical summation order (bitwise determinism) -----------------
// Every dot product (MatMul, the sum of squares in RmsNorm, the q.k scores of
// Attention) is computed as follows, identically by the scalar, AVX2,
// AVX-512 and AVX-512 VNNI kernels, whatever the number of rows in x and
// however they are grouped:
//   1. The weight row is converted exactly to f32 (F16/BF16 widen exactly),
//      so it does not matter whether a kernel converts on the fly or through
//      a scratch buffer.
//   2. 16 f32 lanes start at +0. Element i (index order) updates lane i % 16:
//      lane = fma(w[i], x[i], lane), one rounding. A length that is not a
//      multiple of 16 is zero-padded to one (the padding updates its lanes
//      with fma(0, 0, lane)).
//   3. The lanes are reduced by a fixed tree: s8[i] = l[i] + l[i+8],
//      s4[i] = s8[i] + s8[i+4], s2[i] = s4[i] + s4[i+2], result = s2[0] + s2[1].
// MatMul with Q8_0 / Q4_0 weights (as in the GGUF engines) replaces step 1-2:
//   a. Each row of x is quantized once per call to Q8_0 blocks by QuantizeRow
//      (tensor/quant.h), the one scalar routine: block b has codes qx_i in
//      [-127, 127] and scale dx_b = F16ToF32 of its f16 scale.
//   b. Per weight row and block b: isum_b = sum_{i<32} qw_i * qx_i, an exact
//      int32 (qw_i: the Q8_0 code, -128 included, or the Q4_0 nibble - 8;
//      |isum_b| <= 32 * 128 * 127 < 2^24, so (float)isum_b is exact), and
//      dw_b the F16ToF32 of the weight block's scale.
//   c. 16 f32 lanes start at +0; block b (in increasing order) updates lane
//      b % 16: lane = fma(dw_b * dx_b, (float)isum_b, lane), where
//      dw_b * dx_b is one rounded f32 multiply. Lanes without a block of
//      their own in the last group are left as they are (a zero block: scale
//      0, codes 0, gives fma(0, 0, lane) = lane, since no lane is ever -0).
//   d. The lanes are reduced by the tree of step 3.
//   The other block32 types (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) follow a-d
//   with qw_i their signed integer code: Q5_0 (5-bit code) - 16,
//   IQ4_NL kIq4nlValues[code], MXFP4 kMxfp4Values[code], Q4_1 / Q5_1 the
//   unsigned code itself; dw_b is F16ToF32(d), for MXFP4 E8M0Half(e) =
//   2^(e - 128) exactly. Q4_1 / Q5_1 (w = d*q + m) add a second update
//   right after c's: lane = fma(mw_b * dx_b, (float)sx_b, lane), where mw_b
//   is F16ToF32(m) and sx_b the sum of the activation block's 32 codes.
// MatMul with K-family weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS):
//   A. Each row of x is quantized once per call to Q8_K super-blocks by
//      QuantizeRow (256 codes qx_i in [-127, 127], an f32 scale dx_s, the
//      sums bsum_j of each 16 consecutive codes).
//   B. Per weight row and super-block s (256 elements) two exact int32 sums
//      over its sub-blocks j (tensor/quant_blocks.h has the layouts):
//        A_s = sum_j sc_j * isum_j,   isum_j = sum_{i in j} qw_i * qx_i
//        B_s = sum_j mn_j * (sum of the qx_i of sub-block j)
//      Q2_K: 16 sub-blocks of 16, qw in 0..3, sc_j = scales[j] & 15,
//            mn_j = scales[j] >> 4.
//      Q3_K: 16 x 16, qw = 2 low bits + 4 * hmask bit - 4 (-4..3), sc_j the
//            6-bit scale - 32; no B.
//      Q4_K: 8 x 32, qw in 0..15, sc_j / mn_j the 6-bit scale / min.
//      Q5_K: as Q4_K with qw in 0..31.
//      Q6_K: 16 x 16, qw = 6-bit code - 32, sc_j = scales[j] (int8); no B.
//      IQ4_XS: 8 x 32, qw = kIq4nlValues[code], sc_j = 6-bit scale - 32;
//            no B.
//      (|A_s| < 2^28 for every type, so the sums never overflow; (float)A_s
//      rounds to nearest even, the same on every ISA.)
//   C. 16 f32 lanes start at +0; super-block s (in increasing order) updates
//      lane s % 16: lane = fma(dw_s * dx_s, (float)A_s, lane), then for the
//      types with mins (Q2_K, Q4_K, Q5_K) lane = fma(-(dmin_s * dx_s),
//      (float)B_s, lane); dw_s / dmin_s are F16ToF32 of d / dmin, each
//      product one rounded f32 multiply.
//   D. The lanes are reduced by the tree of step 3.
// The integer sums are exact, so how a kernel gets them (plain int loops,
// maddubs with the sign trick, VNNI dpbusd with offset codes corrected by the
// activation code sums or with signed codes against activations biased by
// 128 and a constant of the weights, decode from the stored blocks or prefill
// from unpacked ones) never changes a bit; cpu_qdot.h has the data layouts.
// Plain sums (softmax and attention denominators) use the same lanes and tree
// with + instead of fma.
//
// Other op definitions (all fp32, no fused multiply-add unless stated):
//   RmsNorm:   scale = 1 / sqrt(dot(x, x) / n + eps); y = (x * scale) * w.
//   Softmax:   e = ExpF(x - max); y = e / CanonicalSum(e).
//   Attention: over the visible rows j = first..p (first = max(0, p - W + 1)
//              with a window W, else 0), indexed from 0 in that order:
//              s_j = dot(q, k_j) * scale; m = max_j s_j, then with a sink z
//              m = max(m, z); p_j = ExpF(s_j - m);
//              acc = 0; for j in order: acc = fma(p_j, v_j, acc) per element;
//              sum = CanonicalSum(p), then with a sink sum = sum + ExpF(z - m);
//              out = acc / sum. (No sink, no window: the plain definition.)
//   RoPE:      theta_i = pos * inv_freq_i in double (RopeInverseFrequencies of
//              backend/rope.h: base^(-2i/dims), or YaRN's blend computed in
//              double); c = (float)(cos(theta) * f), s = (float)(sin(theta) * f)
//              with f = RopeAttentionFactor (1 without scaling: the product is
//              exact); (a, b) -> (a*c - b*s, a*s + b*c).
//   RouterTopK: descending selection (ties: lower id); e_j = ExpF(l_j - l_max);
//              normalize: w_j = e_j / sum of the selected e (selection order);
//              else w_j = e_j / sum of every expert's e (expert order); then
//              w_j * scale when scale != 1.
//   AddBias:   x + b.  Sigmoid: 1 / (1 + ExpF(-x)).
//   SwiGlu:    silu(g) * u with silu(g) = g / (1 + ExpF(-g)).
//   SwiGluOai: g = gate > limit ? limit : gate;
//              u = up < -limit ? -limit : (up > limit ? limit : up);
//              out = (g / (1 + ExpF(-(alpha * g)))) * (u + 1).
//   GeGlu:     (0.5 * g * (1 + TanhF(0.7978845608 * (g + 0.044715 * (g*g*g))))) * u
//              with TanhF(y) = 1 - 2 / (ExpF(2y) + 1).  SoftCap: cap * TanhF(x / cap).
//   Scale:     x * factor.
//   ScatterAddScaled: dst = dst + (scale * src), rows in order.
//   CombineExperts: out = 0, then out = out + (w * y) per slot in
//              NextExpertSlot's order (ScatterAddScaled's steps from zeros).
// ExpF is the backend's own exp (cpu_math.h), identical on every machine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_ops.h"
#include "cpu_qdot.h"
#include "util/thread_pool.h"

namespace odmoe {

class CpuBackend final : public Backend {
 public:
  /// `threads` <= 0: one per hardware thread. ISA: DefaultCpuIsa().
  explicit CpuBackend(int threads);
  /// Forces an ISA level; one above DetectedCpuIsa() is lowered to it.
  CpuBackend(int threads, CpuIsa isa);

  CpuIsa isa() const { return kernels_->isa; }
  /// Whether LoadWeight copies K-family weights into KInterleave16 where the
  /// ISA has the kernels (default: on unless ODMOE_CPU_REPACK=0).
  bool repack_weights() const { return repack_; }
  void set_repack_weights(bool on) { repack_ = on; }
  int threads() const { return pool_.threads(); }

  std::string name() const override { return "cpu"; }
  bool host_memory() const override { return true; }

  absl::StatusOr<std::unique_ptr<BackendBuffer>> Allocate(size_t bytes) override;
  absl::Status CopyToBackend(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::StatusOr<BackendWeight> LoadWeight(const TensorView& host) override;
  /// kInterleaved16 for the K-family weights LoadWeight repacks.
  WeightLayout SlotLayout(DType type, int64_t rows, int64_t cols) const override;
  void ArrangeWeight(const TensorView& view, WeightLayout layout, void* dst) const override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  void MatMul(const WeightRef& w, ConstMat x, Mat y) override;
  /// One quantization of x and one parallel loop for both products (when
  /// the two weights have one type).
  void MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) override;
  /// Every picked weight's product in one parallel loop, x quantized once
  /// (CpuMatMulBatch): the bits of Backend's MatMul per row.
  void MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) override;
  void MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids, ConstMat x,
                      Mat ya, Mat yb) override;
  void GetRows(const WeightRef& table, const int32_t* ids, Mat out) override;
  void RmsNorm(ConstMat x, const float* weight, float eps, Mat y) override;
  void Rope(Mat x, int head_dim, const int32_t* positions, const RopeParams& rope) override;
  void Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head, int n_head_kv,
                 int head_dim, int pos0, float scale, const AttentionOptions& options,
                 Mat out) override;
  void Softmax(Mat x) override;
  /// Rows spread over the threads (one row's score is the reference's).
  absl::Status ScoreLogitRows(ConstMat logits, const int32_t* targets, LogitRowScore* out) override;
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
  void CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col, int64_t cols) override;
  void GatherRows(ConstMat src, const int32_t* idx, Mat dst) override;
  void ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) override;
  void CombineExperts(ConstMat ys, const int32_t* ids, const float* weights, int k,
                      Mat out) override;
  // Linear attention (cpu_delta_net.cpp).
  void Mul(ConstMat a, ConstMat b, Mat out) override;
  void CausalConvSilu(ConstMat x, const float* weight, int kernel, const float* state_in,
                      float* state_out, Mat out) override;
  void GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                     const float* dt_bias, const DeltaNetParams& p, const float* state_in,
                     float* state_out, Mat out) override;
  // Mamba-2 (cpu_mamba2.cpp).
  void CausalConvBiasSilu(ConstMat x, const float* weight, const float* bias, int kernel,
                          const float* state_in, float* state_out, Mat out) override;
  void Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d, const float* dt_bias,
                  const Mamba2Params& p, const float* state_in, float* state_out,
                  Mat out) override;
  void GroupRmsNormGated(ConstMat y, ConstMat z, const float* weight, int group, float eps,
                         Mat out) override;

 private:
  /// True for the weights LoadWeight copies: the K-family types of 16 rows
  /// or more the ISA could interleave (interleaved where SlotLayout says so,
  /// else in row order). Every other weight is a view.
  bool CopiesWeight(DType type, int64_t rows) const;
  /// Appends row j's product to picked_ for every row whose id is in the table.
  void AddPicked(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y);

  const CpuKernels* kernels_;
  bool repack_;
  mutable ThreadPool pool_;
  CpuQuantScratch quant_scratch_;   // activations of quantized MatMul
  std::vector<CpuProduct> picked_;  // the products of a by-ids op
};

}  // namespace odmoe
