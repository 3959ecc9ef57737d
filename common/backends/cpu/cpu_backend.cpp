#include "cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backend/expert_order.h"
#include "backend/op_checks.h"
#include "cpu_kquant.h"
#include "cpu_math.h"
#include "cpu_ops.h"
#include "util/env_flag.h"
#include "util/mmap_file.h"
#include "util/status_macros.h"

namespace odmoe {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;

class HostBuffer final : public BackendBuffer {
 public:
  HostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data() override { return data_.get(); }
  size_t size() const override { return size_; }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> data_;
  size_t size_;
};

/// ODMOE_CPU_REPACK: unset or anything but "0" repacks.
bool RepackFromEnvironment() { return EnvFlagOn("ODMOE_CPU_REPACK"); }

}  // namespace

CpuBackend::CpuBackend(int threads) : CpuBackend(threads, DefaultCpuIsa()) {}

CpuBackend::CpuBackend(int threads, CpuIsa isa)
    : kernels_(&CpuKernelsFor(std::min(isa, DetectedCpuIsa()))),
      repack_(RepackFromEnvironment()),
      pool_(threads) {}

absl::StatusOr<std::unique_ptr<BackendBuffer>> CpuBackend::Allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes) return absl::ResourceExhaustedError("allocation size overflows");
  // Buffers of 2 MiB and more (weights, activations of long batches) start
  // on a 2 MiB boundary and ask for transparent huge pages: decode streams
  // hundreds of MB a token, and 4 KiB pages cost a page walk every 4 KiB
  // (measured: a Q6_K model decoded 1.2x faster from huge pages on Zen 4).
  const bool huge = rounded >= kHugePageBytes;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePageBytes : kAlignment, rounded) != 0) p = nullptr;
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat("cannot allocate %d bytes", bytes));
  }
  // Advisory: where THP is off, the buffer keeps 4 KiB pages.
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  return std::make_unique<HostBuffer>(p, bytes);
}

absl::Status CpuBackend::CopyToBackend(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || host_src == nullptr) {
    return absl::InvalidArgumentError("CopyToBackend: null pointer");
  }
  std::memmove(dst, host_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (host_dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError("CopyToHost: null pointer");
  }
  std::memmove(host_dst, src, bytes);
  return absl::OkStatus();
}

absl::StatusOr<BackendWeight> CpuBackend::LoadWeight(const TensorView& host) {
  if (host.ne[2] != 1 || host.ne[3] != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s' is not 2-D (ne = %d x %d x %d x %d)", host.name, host.ne[0],
                        host.ne[1], host.ne[2], host.ne[3]));
  }
  if (!IsKnownGgmlType(static_cast<uint32_t>(host.type))) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' has unsupported type %d",
                                                      host.name, static_cast<uint32_t>(host.type)));
  }
  if (!CpuSupportsWeightType(host.type)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': type %s is not supported by the cpu backend", host.name,
                        Traits(host.type).name));
  }
  if (host.ne[0] <= 0 || host.ne[1] <= 0 || !RowSizeValid(host.type, host.ne[0])) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s' of type %s has an invalid shape %d x %d", host.name,
                        Traits(host.type).name, host.ne[0], host.ne[1]));
  }
  if (host.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' has no data", host.name));
  }
  BackendWeight w;
  w.ref = WeightRef{host.type, host.data, host.ne[1], host.ne[0]};
  const WeightLayout layout = SlotLayout(host.type, w.ref.rows, w.ref.cols);
  if (!CopiesWeight(host.type, w.ref.rows)) {
    // A view of the file: its pages mapped now, not by faults while decoding.
    PrefaultMappedPages(host.data, w.ref.bytes());
    return w;
  }
  ODMOE_ASSIGN_OR_RETURN(w.storage, Allocate(w.ref.bytes()));
  auto* dst = static_cast<uint8_t*>(w.storage->data());
  ArrangeWeight(host, layout, dst);
  w.ref.data = dst;
  w.ref.layout = layout;
  return w;
}

bool CpuBackend::CopiesWeight(DType type, int64_t rows) const {
  const CpuKQuantKernels& kq = CpuKQuantKernelsFor(isa());
  return repack_ && IsKQuantWeightType(type) && rows >= kInterleaveRows &&
         kq.interleaved != nullptr && kq.interleaved(type);
}

WeightLayout CpuBackend::SlotLayout(DType type, int64_t rows, int64_t cols) const {
  if (!CopiesWeight(type, rows) ||
      !InterleavedDecodePays(type, static_cast<size_t>(rows) * RowBytes(type, cols))) {
    return WeightLayout::kRows;
  }
  return WeightLayout::kInterleaved16;
}

void CpuBackend::ArrangeWeight(const TensorView& view, WeightLayout layout, void* dst) const {
  if (layout != WeightLayout::kInterleaved16) {
    // In pieces over the threads: a fresh buffer's pages are cleared as the
    // copy first touches them, and that is most of a copy's time.
    constexpr size_t kPiece = size_t{4} << 20;
    const size_t bytes = view.bytes();
    const auto* src = static_cast<const uint8_t*>(view.data);
    auto* out = static_cast<uint8_t*>(dst);
    const int64_t pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
    pool_.ParallelFor(pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const size_t at = static_cast<size_t>(p) * kPiece;
        std::memcpy(out + at, src + at, std::min(kPiece, bytes - at));
      }
    });
    return;
  }
  // KInterleave16: whole groups of 16 rows, the rest copied in row order.
  auto* out = static_cast<uint8_t*>(dst);
  const auto* src = static_cast<const uint8_t*>(view.data);
  const size_t row_bytes = view.row_bytes();
  const size_t group_bytes = kInterleaveRows * row_bytes;
  const int64_t groups = view.rows() / kInterleaveRows;
  const CpuKQuantKernels& kq = CpuKQuantKernelsFor(isa());
  pool_.ParallelFor(groups, 1, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      if (kq.interleave_rows != nullptr) {
        kq.interleave_rows(view.type, src + g * group_bytes, row_bytes, out + g * group_bytes);
      } else {
        InterleaveKRows(view.type, src + g * group_bytes, row_bytes, out + g * group_bytes);
      }
    }
  });
  const size_t done = static_cast<size_t>(groups) * group_bytes;
  std::memcpy(out + done, src + done, view.bytes() - done);
}

void CpuBackend::MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) {
  op_checks::MatMulPair(a, b, x, ya, yb);
  const CpuProduct products[] = {{&a, 0, ya}, {&b, 0, yb}};
  CpuMatMulBatch({kernels_, &pool_, &quant_scratch_}, x, products);
}

void CpuBackend::AddPicked(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) {
  for (int64_t j = 0; j < y.rows; ++j) {
    const int32_t id = ids[j];
    if (id < 0 || id >= table.size()) continue;  // left unwritten, as Backend's
    picked_.push_back(
        {&table.entries[static_cast<size_t>(id)], x.rows == 1 ? 0 : j, y.RowRange(j, 1)});
  }
}

void CpuBackend::MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) {
  op_checks::MatMulById(this, table, x, y);
  picked_.clear();
  AddPicked(table, ids, x, y);
  CpuMatMulBatch({kernels_, &pool_, &quant_scratch_}, x, picked_);
}

void CpuBackend::MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids,
                                ConstMat x, Mat ya, Mat yb) {
  op_checks::MatMulPairById(this, a, b, x, ya, yb);
  picked_.clear();
  AddPicked(a, ids, x, ya);
  AddPicked(b, ids, x, yb);
  CpuMatMulBatch({kernels_, &pool_, &quant_scratch_}, x, picked_);
}

void CpuBackend::MatMul(const WeightRef& w, ConstMat x, Mat y) {
  op_checks::MatMul(w, x, y);
  CpuMatMul({kernels_, &pool_, &quant_scratch_}, w, x, y);
}

void CpuBackend::GetRows(const WeightRef& table, const int32_t* ids, Mat out) {
  op_checks::GetRows(table, out);
  CpuGetRows({kernels_, &pool_}, table, ids, out);
}

void CpuBackend::RmsNorm(ConstMat x, const float* weight, float eps, Mat y) {
  op_checks::SameShape("RmsNorm", x, y);
  CpuRmsNorm({kernels_, &pool_}, x, weight, eps, y);
}

void CpuBackend::Rope(Mat x, int head_dim, const int32_t* positions, const RopeParams& rope) {
  op_checks::Rope(x, head_dim, rope);
  CpuRope({kernels_, &pool_}, x, head_dim, positions, rope);
}

void CpuBackend::Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head,
                           int n_head_kv, int head_dim, int pos0, float scale,
                           const AttentionOptions& options, Mat out) {
  op_checks::Attention(q, k_cache, v_cache, n_head, n_head_kv, head_dim, pos0, options, out);
  CpuAttention({kernels_, &pool_}, q, k_cache, v_cache, n_head, n_head_kv, head_dim, pos0, scale,
               options, out);
}

void CpuBackend::Softmax(Mat x) { CpuSoftmax({kernels_, &pool_}, x); }

absl::Status CpuBackend::ScoreLogitRows(ConstMat logits, const int32_t* targets,
                                        LogitRowScore* out) {
  ODMOE_RETURN_IF_ERROR(CheckLogitRows(logits));
  pool_.ParallelFor(logits.rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = ScoreLogitRow(logits.Row(r), logits.cols, targets[r]);
  });
  return absl::OkStatus();
}

void CpuBackend::RouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids,
                            float* weights) {
  op_checks::RouterTopK(logits, k);
  CpuRouterTopK(logits, k, gating, ids, weights);
}

void CpuBackend::AddBias(Mat x, const float* bias) {
  for (int64_t t = 0; t < x.rows; ++t) {
    float* r = x.Row(t);
    for (int64_t c = 0; c < x.cols; ++c) r[c] = r[c] + bias[c];
  }
}

void CpuBackend::Sigmoid(Mat x) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = 0; i < n; ++i) x.data[i] = 1.0f / (1.0f + cpu_math::ExpF(-x.data[i]));
}

void CpuBackend::Mul(ConstMat a, ConstMat b, Mat out) {
  op_checks::SameShape("Mul", a, b);
  op_checks::SameShape("Mul", a, out);
  CpuMul({kernels_, &pool_}, a, b, out);
}

void CpuBackend::CausalConvSilu(ConstMat x, const float* weight, int kernel, const float* state_in,
                                float* state_out, Mat out) {
  op_checks::SameShape("CausalConvSilu", x, out);
  CpuCausalConvSilu({kernels_, &pool_}, x, weight, kernel, state_in, state_out, out);
}

void CpuBackend::GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                               const float* dt_bias, const DeltaNetParams& p, const float* state_in,
                               float* state_out, Mat out) {
  CpuGatedDeltaNet({kernels_, &pool_}, qkv, alpha, beta, a, dt_bias, p, state_in, state_out, out);
}

void CpuBackend::CausalConvBiasSilu(ConstMat x, const float* weight, const float* bias, int kernel,
                                    const float* state_in, float* state_out, Mat out) {
  op_checks::SameShape("CausalConvBiasSilu", x, out);
  CpuCausalConvBiasSilu({kernels_, &pool_}, x, weight, bias, kernel, state_in, state_out, out);
}

void CpuBackend::Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d,
                            const float* dt_bias, const Mamba2Params& p, const float* state_in,
                            float* state_out, Mat out) {
  CpuMamba2Scan({kernels_, &pool_}, xbc, dt, a, d, dt_bias, p, state_in, state_out, out);
}

void CpuBackend::GroupRmsNormGated(ConstMat y, ConstMat z, const float* weight, int group,
                                   float eps, Mat out) {
  op_checks::SameShape("GroupRmsNormGated", y, z);
  op_checks::SameShape("GroupRmsNormGated", y, out);
  CpuGroupRmsNormGated({kernels_, &pool_}, y, z, weight, group, eps, out);
}

void CpuBackend::SwiGlu(ConstMat gate, ConstMat up, Mat out) {
  op_checks::SameShape("SwiGlu", gate, up);
  op_checks::SameShape("SwiGlu", gate, out);
  CpuSwiGlu({kernels_, &pool_}, gate, up, out);
}

void CpuBackend::SwiGluOai(ConstMat gate, ConstMat up, float alpha, float limit, Mat out) {
  op_checks::SameShape("SwiGluOai", gate, up);
  op_checks::SameShape("SwiGluOai", gate, out);
  CpuSwiGluOai({kernels_, &pool_}, gate, up, alpha, limit, out);
}

void CpuBackend::GeGlu(ConstMat gate, ConstMat up, Mat out) {
  op_checks::SameShape("GeGlu", gate, up);
  op_checks::SameShape("GeGlu", gate, out);
  CpuGeGlu({kernels_, &pool_}, gate, up, out);
}

void CpuBackend::Scale(Mat x, const float* factor) {
  const int64_t n = x.rows * x.cols;
  const float f = factor[0];
  for (int64_t i = 0; i < n; ++i) x.data[i] = x.data[i] * f;
}

void CpuBackend::SoftCap(Mat x, float cap) {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = 0; i < n; ++i) x.data[i] = cap * cpu_math::TanhF(x.data[i] / cap);
}

void CpuBackend::Add(ConstMat a, ConstMat b, Mat out) {
  op_checks::SameShape("Add", a, b);
  op_checks::SameShape("Add", a, out);
  const int64_t n = out.rows * out.cols;
  for (int64_t i = 0; i < n; ++i) out.data[i] = a.data[i] + b.data[i];
}

void CpuBackend::Copy(ConstMat src, Mat dst) {
  op_checks::SameShape("Copy", src, dst);
  std::memcpy(dst.data, src.data, static_cast<size_t>(src.rows * src.cols) * sizeof(float));
}

void CpuBackend::CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col,
                             int64_t cols) {
  op_checks::CopyColumns(src, src_col, dst, dst_col, cols);
  const size_t bytes = static_cast<size_t>(cols) * sizeof(float);
  for (int64_t t = 0; t < src.rows; ++t) {
    std::memcpy(dst.Row(t) + dst_col, src.data + t * src.cols + src_col, bytes);
  }
}

void CpuBackend::GatherRows(ConstMat src, const int32_t* idx, Mat dst) {
  op_checks::RowsOf("GatherRows", src, dst);
  const size_t row = static_cast<size_t>(dst.cols) * sizeof(float);
  for (int64_t i = 0; i < dst.rows; ++i) std::memcpy(dst.Row(i), src.Row(idx[i]), row);
}

void CpuBackend::ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) {
  op_checks::RowsOf("ScatterAddScaled", src, dst);
  for (int64_t i = 0; i < src.rows; ++i) {
    const float* s = src.Row(i);
    float* d = dst.Row(idx[i]);
    const float a = scale[i];
    for (int64_t c = 0; c < src.cols; ++c) d[c] = d[c] + a * s[c];
  }
}

void CpuBackend::CombineExperts(ConstMat ys, const int32_t* ids, const float* weights, int k,
                                Mat out) {
  op_checks::CombineExperts(ys, k, out);
  for (int64_t t = 0; t < out.rows; ++t) {
    float* o = out.Row(t);
    std::fill(o, o + out.cols, 0.0f);
    const int32_t* row_ids = ids + t * k;
    for (int j = NextExpertSlot(row_ids, k, -1); j >= 0; j = NextExpertSlot(row_ids, k, j)) {
      const float a = weights[t * k + j];
      const float* s = ys.Row(t * k + j);
      for (int64_t c = 0; c < out.cols; ++c) o[c] = o[c] + a * s[c];
    }
  }
}

}  // namespace odmoe
