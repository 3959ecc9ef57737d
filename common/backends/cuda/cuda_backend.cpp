#include "cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/op_checks.h"
#include "cuda_kernels.h"
#include "cuda_numerics_dequant.h"
#include "cuda_weight_rules.h"
#include "util/env_flag.h"
#include "util/status_macros.h"

namespace odmoe {

namespace {

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
// Attention scores: at most this many floats at once (64 MiB).
constexpr int64_t kAttentionMaxScratchFloats = int64_t{16} << 20;
constexpr size_t kScratchGranule = size_t{1} << 20;
static_assert(sizeof(cuda::QActSuperBlock) == kQ8KActBytes, "matmul_plan.h's Q8_K scratch size");

class DeviceBuffer final : public BackendBuffer {
 public:
  DeviceBuffer(cuda::DeviceMemory memory, size_t size) : memory_(std::move(memory)), size_(size) {}
  void* data() override { return memory_.data(); }
  size_t size() const override { return size_; }

 private:
  cuda::DeviceMemory memory_;
  size_t size_;
};

absl::Status CheckWeightView(const TensorView& host) {
  if (host.ne[2] != 1 || host.ne[3] != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s' is not 2-D (ne = %d x %d x %d x %d)", host.name, host.ne[0],
                        host.ne[1], host.ne[2], host.ne[3]));
  }
  if (!IsKnownGgmlType(static_cast<uint32_t>(host.type))) {
    return absl::InvalidArgumentError(absl::StrFormat("tensor '%s' has unsupported type %d",
                                                      host.name, static_cast<uint32_t>(host.type)));
  }
  if (!cuda::CudaSupportsWeightType(host.type)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor '%s': type %s is not supported by the cuda backend", host.name,
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  const std::string name = CudaBackendName(options);
  auto prefixed = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat("backend '", name, "': ", st.message()));
  };
  absl::StatusOr<int> count = cuda::UsableDeviceCount();
  if (!count.ok()) return prefixed(count.status());
  if (options.device >= *count) {
    return absl::UnavailableError(absl::StrFormat("backend '%s': this machine has %d CUDA device%s",
                                                  name, *count, *count == 1 ? "" : "s"));
  }
  std::unique_ptr<CudaBackend> be(new CudaBackend(options));
  // ODMOE_CUDA_NORM_QUANT=0: every product quantizes its own activations
  // (the same bits; for timing the norms' quantization against it).
  be->norm_quant_enabled_ = EnvFlagOn("ODMOE_CUDA_NORM_QUANT");
  absl::Status st = be->UseDevice();
  if (st.ok()) {
    absl::StatusOr<cuda::StreamPtr> stream = cuda::CreateStream();
    st = stream.status();
    if (st.ok()) be->stream_ = std::move(*stream);
  }
  if (st.ok() && options.float_matmul == FloatMatMulPolicy::kCublas) {
    // cuBLAS only where it is used: creating a handle costs time and memory.
    absl::StatusOr<cuda::CublasPtr> handle = cuda::CreateCublas();
    absl::StatusOr<cuda::DeviceMemory> ws = cuda::DeviceMemory::Allocate(kCublasWorkspaceBytes);
    st = handle.ok() ? ws.status() : handle.status();
    if (st.ok()) {
      be->cublas_ = std::move(*handle);
      be->cublas_workspace_ = std::move(*ws);
      cublasHandle_t h = be->cublas_.get();
      st = cuda::CublasStatus(cublasSetStream(h, be->stream()), "cublasSetStream");
      if (st.ok()) {
        st = cuda::CublasStatus(
            cublasSetWorkspace(h, be->cublas_workspace_.data(), be->cublas_workspace_.size()),
            "cublasSetWorkspace");
      }
      // Full F32 (no TF32) and no atomics: deterministic from run to run.
      if (st.ok()) st = cuda::CublasStatus(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "math mode");
      if (st.ok()) {
        st = cuda::CublasStatus(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "atomics");
      }
    }
  }
  if (!st.ok()) return prefixed(st);
  return be;
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr && UseDevice().ok()) cudaStreamSynchronize(stream_.get());
}

bool CudaBackend::Record(absl::Status st) {
  if (st.ok()) return true;
  if (error_.ok()) error_ = absl::Status(st.code(), absl::StrCat(name(), ": ", st.message()));
  return false;
}

bool CudaBackend::RecordCuda(cudaError_t err, const char* what) {
  return Record(cuda::CudaStatus(err, what));
}

bool CudaBackend::Enter() {
  norm_quant_.Drop();
  return EnterKeepingNormQuant();
}

bool CudaBackend::EnterKeepingNormQuant() { return error_.ok() && Record(UseDevice()); }

void* CudaBackend::Grow(cuda::DeviceMemory& m, size_t bytes, const char* what,
                        bool optional) {
  if (m.size() >= bytes) return m.data();
  // The old buffer may still be read by queued ops: wait, free, then grow.
  if (!RecordCuda(cudaStreamSynchronize(stream()), what)) return nullptr;
  m = cuda::DeviceMemory();
  const size_t rounded = (bytes + kScratchGranule - 1) / kScratchGranule * kScratchGranule;
  absl::StatusOr<cuda::DeviceMemory> grown = cuda::DeviceMemory::Allocate(rounded);
  if (!grown.ok() && optional) return nullptr;
  if (!Record(grown.status())) return nullptr;
  m = std::move(*grown);
  return m.data();
}

void* CudaBackend::Scratch(size_t bytes) { return Grow(scratch_, bytes, "scratch growth"); }

const double* CudaBackend::RopeTable(const RopeParams& rope) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
  };
  // Everything the table depends on (the attention factor and the offset are
  // applied by the kernel).
  const bool yarn = rope.scaling.type == RopeScalingType::kYarn;
  const RopeTableKey key{rope.dims,
                         bits(rope.freq_base),
                         yarn,
                         yarn ? bits(rope.scaling.factor) : 0u,
                         yarn ? rope.scaling.original_context : 0,
                         yarn ? bits(rope.scaling.beta_fast) : 0u,
                         yarn ? bits(rope.scaling.beta_slow) : 0u,
                         yarn && rope.scaling.truncate,
                         rope.rotated_pairs};
  if (auto it = rope_tables_.find(key); it != rope_tables_.end()) {
    return static_cast<const double*>(it->second.data());
  }
  // The one definition of backend/rope.h, evaluated on the host in double.
  const std::vector<double> inv_freq = RopeInverseFrequencies(rope);
  const size_t bytes = inv_freq.size() * sizeof(double);
  absl::StatusOr<cuda::DeviceMemory> m = cuda::DeviceMemory::Allocate(bytes);
  if (!Record(m.status())) return nullptr;
  if (!RecordCuda(
          cudaMemcpyAsync(m->data(), inv_freq.data(), bytes, cudaMemcpyHostToDevice, stream()),
          "RoPE table upload") ||
      !RecordCuda(cudaStreamSynchronize(stream()), "RoPE table upload")) {
    return nullptr;
  }
  const double* table = static_cast<const double*>(m->data());
  rope_tables_.emplace(key, std::move(*m));
  return table;
}

// ---- Memory -----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<BackendBuffer>> CudaBackend::Allocate(size_t bytes) {
  ODMOE_RETURN_IF_ERROR(UseDevice());
  absl::StatusOr<cuda::DeviceMemory> m = cuda::DeviceMemory::Allocate(std::max<size_t>(bytes, 1));
  if (!m.ok()) {
    return absl::Status(m.status().code(), absl::StrCat(name(), ": ", m.status().message()));
  }
  return std::make_unique<DeviceBuffer>(std::move(*m), bytes);
}

absl::Status CudaBackend::CopyToBackend(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || host_src == nullptr) {
    return absl::InvalidArgumentError("CopyToBackend: null pointer");
  }
  norm_quant_.DropIfWrites(dst, bytes);
  if (!EnterKeepingNormQuant()) return error_;
  // Synchronous on purpose: the caller may free or reuse host_src at once.
  if (RecordCuda(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream()),
                 "CopyToBackend")) {
    RecordCuda(cudaStreamSynchronize(stream()), "CopyToBackend");
  }
  return error_;
}

absl::Status CudaBackend::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return Synchronize();
  if (host_dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError("CopyToHost: null pointer");
  }
  if (!EnterKeepingNormQuant()) return error_;
  if (RecordCuda(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()),
                 "CopyToHost")) {
    RecordCuda(cudaStreamSynchronize(stream()), "CopyToHost");
  }
  return error_;
}

absl::StatusOr<BackendWeight> CudaBackend::LoadWeight(const TensorView& host) {
  ODMOE_RETURN_IF_ERROR(CheckWeightView(host));
  const WeightRef shape{host.type, nullptr, host.ne[1], host.ne[0]};
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> storage, Allocate(shape.bytes()));
  ODMOE_RETURN_IF_ERROR(CopyToBackend(storage->data(), host.data, shape.bytes()));
  BackendWeight w;
  w.ref = shape;
  w.ref.data = storage->data();
  w.storage = std::move(storage);
  return w;
}

absl::Status CudaBackend::Synchronize() {
  if (!EnterKeepingNormQuant()) return error_;
  RecordCuda(cudaStreamSynchronize(stream()), "Synchronize");
  return error_;
}

// ---- Ops ----------------------------------------------------------------------

void CudaBackend::MatMul(const WeightRef& w, ConstMat x, Mat y) {
  op_checks::MatMul(w, x, y);
  op_checks::RowOrder("MatMul", w);
  norm_quant_.DropIfWrites(y);
  if (!EnterKeepingNormQuant() || x.rows == 0 || w.rows == 0) return;
  if (!cuda::WeightAligned(w.type, w.data)) {
    Record(absl::InvalidArgumentError(
        absl::StrFormat("MatMul: %s weight at a misaligned device address", Traits(w.type).name)));
    return;
  }
  const MatMulPlan plan = PlanMatMul(w.type, w.rows, w.cols, x.rows, options_.float_matmul);
  switch (plan.path) {
    case MatMulPath::kQuantized:
    case MatMulPath::kQuantizedK: {
      void* xq = QuantizeActivations(plan, x);
      if (xq != nullptr) QuantizedProduct(plan, w, x, xq, y);
      return;
    }
    case MatMulPath::kFloatCanonical:
      RecordCuda(
          cuda::LaunchFloatMatMul(stream(), w.type, w.data, w.rows, w.cols, x.data, x.rows, y.data),
          "MatMul");
      return;
    case MatMulPath::kCublasF32:
    case MatMulPath::kCublasDequantized:
      CublasMatMul(w, x, y, plan);
      return;
  }
}

namespace {

/// Q8_0 activations of rows x cols in scratch at `base`: the codes of every
/// 32-element block, then one float scale per block
/// (QuantizedActivationBytes in all).
struct Q8_0Scratch {
  cuda::QActBlock* codes;
  float* scales;
};
Q8_0Scratch Q8_0ScratchAt(void* base, int64_t rows, int64_t cols) {
  auto* bytes = static_cast<uint8_t*>(base);
  const size_t blocks = static_cast<size_t>(rows * (cols / 32));
  return {reinterpret_cast<cuda::QActBlock*>(bytes),
          reinterpret_cast<float*>(bytes + blocks * sizeof(cuda::QActBlock))};
}

}  // namespace

void* CudaBackend::QuantizeActivations(const MatMulPlan& plan, ConstMat x) {
  if (std::optional<size_t> at = norm_quant_.Find(plan.path, x)) {
    return static_cast<uint8_t*>(norm_quant_mem_.data()) + *at;  // the norm quantized x
  }
  auto* base = static_cast<uint8_t*>(Scratch(plan.scratch_bytes));
  if (base == nullptr) return nullptr;
  if (plan.path == MatMulPath::kQuantizedK) {
    auto* xq = reinterpret_cast<cuda::QActSuperBlock*>(base);
    return RecordCuda(cuda::LaunchQuantizeQ8_K(stream(), x.data, x.rows, x.cols, xq),
                      "MatMul: quantize activations to Q8_K")
               ? base
               : nullptr;
  }
  const Q8_0Scratch q = Q8_0ScratchAt(base, x.rows, x.cols);
  return RecordCuda(cuda::LaunchQuantizeQ8_0(stream(), x.data, x.rows, x.cols, q.codes, q.scales),
                    "MatMul: quantize activations")
             ? base
             : nullptr;
}

void CudaBackend::QuantizedProduct(const MatMulPlan& plan, const WeightRef& w, ConstMat x,
                                   void* xq, Mat y, const cuda::ProductSlices& slices) {
  auto* base = static_cast<uint8_t*>(xq);
  const int64_t n = slices.table != nullptr ? 1 : x.rows;  // rows of each slice
  if (plan.path == MatMulPath::kQuantizedK) {
    RecordCuda(cuda::LaunchKQuantMatMul(stream(), w.type, w.data, w.rows, w.cols,
                                        reinterpret_cast<cuda::QActSuperBlock*>(base), n, y.data,
                                        slices),
               "MatMul (K family)");
    return;
  }
  const Q8_0Scratch q = Q8_0ScratchAt(base, x.rows, x.cols);
  RecordCuda(cuda::LaunchQuantMatMul(stream(), w.type, w.data, w.rows, w.cols, q.codes, q.scales,
                                     n, y.data, slices),
             "MatMul (quantized)");
}

void* CudaBackend::QuantizeSwiGlu(const MatMulPlan& plan, Mat gate, ConstMat up) {
  auto* base = static_cast<uint8_t*>(Scratch(plan.scratch_bytes));
  if (base == nullptr) return nullptr;
  if (plan.path == MatMulPath::kQuantizedK) {
    return RecordCuda(cuda::LaunchQuantizeQ8_KSwiGlu(stream(), gate.data, up.data, gate.rows,
                                                     gate.cols,
                                                     reinterpret_cast<cuda::QActSuperBlock*>(base)),
                      "SwiGluMatMul: activation and Q8_K quantization")
               ? base
               : nullptr;
  }
  const Q8_0Scratch q = Q8_0ScratchAt(base, gate.rows, gate.cols);
  return RecordCuda(cuda::LaunchQuantizeQ8_0SwiGlu(stream(), gate.data, up.data, gate.rows,
                                                   gate.cols, q.codes, q.scales),
                    "SwiGluMatMul: activation and Q8_0 quantization")
             ? base
             : nullptr;
}

void CudaBackend::MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya,
                             Mat yb) {
  op_checks::MatMulPair(a, b, x, ya, yb);
  op_checks::RowOrder("MatMulPair", a);
  op_checks::RowOrder("MatMulPair", b);
  const MatMulPlan pa = PlanMatMul(a.type, a.rows, a.cols, x.rows, options_.float_matmul);
  const MatMulPlan pb = PlanMatMul(b.type, b.rows, b.cols, x.rows, options_.float_matmul);
  const bool shared = pa.path == pb.path && QuantizedPath(pa.path);
  if (!shared || x.rows == 0 || a.rows == 0 || b.rows == 0) {
    MatMul(a, x, ya);
    MatMul(b, x, yb);
    return;
  }
  norm_quant_.DropIfWrites(ya);
  norm_quant_.DropIfWrites(yb);
  if (!EnterKeepingNormQuant()) return;
  if (!cuda::WeightAligned(a.type, a.data) || !cuda::WeightAligned(b.type, b.data)) {
    Record(absl::InvalidArgumentError(absl::StrFormat(
        "MatMulPair: %s / %s weight at a misaligned device address", Traits(a.type).name,
        Traits(b.type).name)));
    return;
  }
  // Same path, same x: the same quantized activations and scratch size;
  // weights of one type and shape (k and v, a gate and an up): one launch.
  void* xq = QuantizeActivations(pa, x);
  if (xq == nullptr) return;
  if (a.SameShapeAs(b)) {
    cuda::ProductSlices pair;
    pair.w_b = b.data;
    pair.y_b = yb.data;
    QuantizedProduct(pa, a, x, xq, ya, pair);
    return;
  }
  QuantizedProduct(pa, a, x, xq, ya);
  QuantizedProduct(pb, b, x, xq, yb);
}

void CudaBackend::SwiGluMatMul(const WeightRef& w, Mat gate, ConstMat up, Mat y) {
  op_checks::SameShape("SwiGluMatMul", gate, up);
  op_checks::MatMul(w, gate, y);
  op_checks::RowOrder("SwiGluMatMul", w);
  const MatMulPlan plan = PlanMatMul(w.type, w.rows, w.cols, gate.rows, options_.float_matmul);
  if (!QuantizedPath(plan.path) || gate.rows == 0 || w.rows == 0) {
    SwiGlu(gate, up, gate);
    MatMul(w, gate, y);
    return;
  }
  norm_quant_.DropIfWrites(gate);  // SwiGLU goes into gate
  norm_quant_.DropIfWrites(y);
  if (!EnterKeepingNormQuant()) return;
  if (!cuda::WeightAligned(w.type, w.data)) {
    Record(absl::InvalidArgumentError(absl::StrFormat(
        "SwiGluMatMul: %s weight at a misaligned device address", Traits(w.type).name)));
    return;
  }
  void* xq = QuantizeSwiGlu(plan, gate, up);
  if (xq != nullptr) QuantizedProduct(plan, w, gate, xq, y);
}

void CudaBackend::CublasMatMul(const WeightRef& w, ConstMat x, Mat y, const MatMulPlan& plan) {
  // Row-major y[n, out] = x[n, k] w^T is column-major Y (out x n) = W^T X
  // with W the column-major k x out view of w and X the k x n view of x.
  const float one = 1.0f;
  const float zero = 0.0f;
  const int n = static_cast<int>(x.rows);
  const int k = static_cast<int>(w.cols);
  const int ldy = static_cast<int>(w.rows);
  if (plan.path == MatMulPath::kCublasF32) {
    Record(cuda::CublasStatus(
        cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, ldy, n, k, &one,
                    static_cast<const float*>(w.data), k, x.data, k, &zero, y.data, ldy),
        "MatMul: cublasSgemm"));
    return;
  }
  auto* chunk = static_cast<float*>(Scratch(plan.scratch_bytes));
  if (chunk == nullptr) return;
  for (int64_t o0 = 0; o0 < w.rows; o0 += plan.chunk_rows) {
    const int rows = static_cast<int>(std::min(plan.chunk_rows, w.rows - o0));
    if (!RecordCuda(cuda::LaunchDequantRows(stream(), w.type, w.data, w.cols, o0, rows, chunk),
                    "MatMul: widen weight chunk") ||
        !Record(cuda::CublasStatus(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, rows, n, k,
                                               &one, chunk, k, x.data, k, &zero, y.data + o0, ldy),
                                   "MatMul: cublasSgemm"))) {
      return;
    }
  }
}

void CudaBackend::GetRows(const WeightRef& table, const int32_t* ids, Mat out) {
  op_checks::GetRows(table, out);
  op_checks::RowOrder("GetRows", table);
  if (!Enter()) return;
  if (!cuda::WeightAligned(table.type, table.data)) {
    Record(absl::InvalidArgumentError("GetRows: table at a misaligned device address"));
    return;
  }
  RecordCuda(
      cuda::LaunchGetRows(stream(), table.type, table.data, table.cols, ids, out.rows, out.data),
      "GetRows");
}

std::optional<cuda::NormQuantOut> CudaBackend::NormQuantOutFor(ConstMat x, const float* add,
                                                               const float* weight, Mat y) {
  if (!norm_quant_enabled_ || !NormQuantCache::Fits(y.rows, y.cols) ||
      !cuda::RmsNormCanQuantize(x, add, weight, y)) {
    return std::nullopt;
  }
  // An optimization only: a buffer that cannot be had leaves the norm plain
  // (the backend does not fail for it).
  auto* base = static_cast<uint8_t*>(Grow(norm_quant_mem_, NormQuantCache::Bytes(y.rows, y.cols),
                                          "norm quantization buffer", /*optional=*/true));
  if (base == nullptr) return std::nullopt;
  const uint8_t forms = norm_quant_.FormsFor(weight);
  cuda::NormQuantOut q;
  if (forms & NormQuantCache::kQ8K) q.q8k = reinterpret_cast<cuda::QActSuperBlock*>(base);
  if (forms & NormQuantCache::kQ8_0) {
    const Q8_0Scratch q8_0 =
        Q8_0ScratchAt(base + NormQuantCache::Q8_0Offset(y.rows, y.cols), y.rows, y.cols);
    q.q8_0_codes = q8_0.codes;
    q.q8_0_scales = q8_0.scales;
  }
  return q;
}

void CudaBackend::NormFilled(const cuda::NormQuantOut& q, const float* weight, Mat y) {
  const uint8_t forms = (q.q8k != nullptr ? NormQuantCache::kQ8K : 0) |
                        (q.q8_0_codes != nullptr ? NormQuantCache::kQ8_0 : 0);
  norm_quant_.Filled(y.data, y.rows, y.cols, weight, forms);
}

void CudaBackend::RmsNorm(ConstMat x, const float* weight, float eps, Mat y) {
  op_checks::SameShape("RmsNorm", x, y);
  if (!Enter()) return;
  const std::optional<cuda::NormQuantOut> q = NormQuantOutFor(x, nullptr, weight, y);
  if (RecordCuda(cuda::LaunchRmsNorm(stream(), x, weight, eps, y, q.value_or(cuda::NormQuantOut{})),
                 "RmsNorm") &&
      q.has_value()) {
    NormFilled(*q, weight, y);
  }
}

void CudaBackend::AddRmsNorm(Mat x, ConstMat a, const float* weight, float eps, Mat y) {
  op_checks::AddRmsNorm(x, a, y);
  if (!Enter()) return;
  const std::optional<cuda::NormQuantOut> q = NormQuantOutFor(x, a.data, weight, y);
  if (RecordCuda(cuda::LaunchAddRmsNorm(stream(), x, a, weight, eps, y,
                                        q.value_or(cuda::NormQuantOut{})),
                 "AddRmsNorm") &&
      q.has_value()) {
    NormFilled(*q, weight, y);
  }
}

void CudaBackend::Rope(Mat x, int head_dim, const int32_t* positions, const RopeParams& rope) {
  op_checks::Rope(x, head_dim, rope);
  if (!Enter() || rope.dims < 2) return;
  const double* table = RopeTable(rope);
  if (table == nullptr) return;
  RecordCuda(cuda::LaunchRope(stream(), x, head_dim, positions, table, rope), "Rope");
}

void CudaBackend::RopePair(Mat a, Mat b, int head_dim, const int32_t* positions,
                           const RopeParams& rope) {
  op_checks::RopePair(a, b, head_dim, rope);
  if (!Enter() || rope.dims < 2) return;
  const double* table = RopeTable(rope);
  if (table == nullptr) return;
  RecordCuda(cuda::LaunchRopePair(stream(), a, b, head_dim, positions, table, rope), "RopePair");
}

void CudaBackend::Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head,
                            int n_head_kv, int head_dim, int pos0, float scale,
                            const AttentionOptions& options, Mat out) {
  op_checks::Attention(q, k_cache, v_cache, n_head, n_head_kv, head_dim, pos0, options, out);
  if (!Enter() || q.rows == 0) return;
  const int64_t floats =
      cuda::AttentionScratchFloats(q.rows, n_head, pos0, kAttentionMaxScratchFloats);
  auto* scratch = static_cast<float*>(Scratch(static_cast<size_t>(floats) * sizeof(float)));
  if (scratch == nullptr) return;
  RecordCuda(cuda::LaunchAttention(stream(), q, k_cache, v_cache, n_head, n_head_kv, head_dim, pos0,
                                   scale, options, out, scratch, floats),
             "Attention");
}

void CudaBackend::Softmax(Mat x) {
  if (Enter()) RecordCuda(cuda::LaunchSoftmax(stream(), x), "Softmax");
}

void CudaBackend::RouterTopK(ConstMat logits, int k, RouterGating gating, int32_t* ids,
                             float* weights) {
  op_checks::RouterTopK(logits, k);
  const size_t picks = static_cast<size_t>(logits.rows) * static_cast<size_t>(k);
  norm_quant_.DropIfWrites(ids, picks * sizeof(int32_t));
  norm_quant_.DropIfWrites(weights, picks * sizeof(float));
  if (EnterKeepingNormQuant()) {
    RecordCuda(cuda::LaunchRouterTopK(stream(), logits, k, gating, ids, weights), "RouterTopK");
  }
}

void CudaBackend::AddBias(Mat x, const float* bias) {
  if (Enter()) RecordCuda(cuda::LaunchAddBias(stream(), x, bias), "AddBias");
}

void CudaBackend::Sigmoid(Mat x) {
  if (Enter()) RecordCuda(cuda::LaunchSigmoid(stream(), x), "Sigmoid");
}

void CudaBackend::Mul(ConstMat a, ConstMat b, Mat out) {
  op_checks::SameShape("Mul", a, b);
  op_checks::SameShape("Mul", a, out);
  if (Enter()) RecordCuda(cuda::LaunchMul(stream(), a, b, out), "Mul");
}

void CudaBackend::CausalConvSilu(ConstMat x, const float* weight, int kernel, const float* state_in,
                                 float* state_out, Mat out) {
  op_checks::SameShape("CausalConvSilu", x, out);
  if (Enter()) {
    RecordCuda(cuda::LaunchCausalConvSilu(stream(), x, weight, kernel, state_in, state_out, out),
               "CausalConvSilu");
  }
}

void CudaBackend::GatedDeltaNet(ConstMat qkv, ConstMat alpha, ConstMat beta, const float* a,
                                const float* dt_bias, const DeltaNetParams& p,
                                const float* state_in, float* state_out, Mat out) {
  if (Enter()) {
    RecordCuda(cuda::LaunchGatedDeltaNet(stream(), qkv, alpha, beta, a, dt_bias, p, state_in,
                                         state_out, out),
               "GatedDeltaNet");
  }
}

void CudaBackend::CausalConvBiasSilu(ConstMat x, const float* weight, const float* bias,
                                     int kernel, const float* state_in, float* state_out,
                                     Mat out) {
  op_checks::SameShape("CausalConvBiasSilu", x, out);
  if (Enter()) {
    RecordCuda(cuda::LaunchCausalConvBiasSilu(stream(), x, weight, bias, kernel, state_in,
                                              state_out, out),
               "CausalConvBiasSilu");
  }
}

void CudaBackend::Mamba2Scan(ConstMat xbc, ConstMat dt, const float* a, const float* d,
                             const float* dt_bias, const Mamba2Params& p, const float* state_in,
                             float* state_out, Mat out) {
  if (Enter()) {
    RecordCuda(
        cuda::LaunchMamba2Scan(stream(), xbc, dt, a, d, dt_bias, p, state_in, state_out, out),
        "Mamba2Scan");
  }
}

void CudaBackend::GroupRmsNormGated(ConstMat y, ConstMat z, const float* weight, int group,
                                    float eps, Mat out) {
  op_checks::SameShape("GroupRmsNormGated", y, z);
  op_checks::SameShape("GroupRmsNormGated", y, out);
  if (Enter()) {
    RecordCuda(cuda::LaunchGroupRmsNormGated(stream(), y, z, weight, group, eps, out),
               "GroupRmsNormGated");
  }
}

void CudaBackend::SwiGlu(ConstMat gate, ConstMat up, Mat out) {
  op_checks::SameShape("SwiGlu", gate, up);
  op_checks::SameShape("SwiGlu", gate, out);
  if (Enter()) RecordCuda(cuda::LaunchSwiGlu(stream(), gate, up, out), "SwiGlu");
}

void CudaBackend::GeGlu(ConstMat gate, ConstMat up, Mat out) {
  op_checks::SameShape("GeGlu", gate, up);
  op_checks::SameShape("GeGlu", gate, out);
  if (Enter()) RecordCuda(cuda::LaunchGeGlu(stream(), gate, up, out), "GeGlu");
}

void CudaBackend::Scale(Mat x, const float* factor) {
  if (Enter()) RecordCuda(cuda::LaunchScale(stream(), x, factor), "Scale");
}

void CudaBackend::SoftCap(Mat x, float cap) {
  if (Enter()) RecordCuda(cuda::LaunchSoftCap(stream(), x, cap), "SoftCap");
}

void CudaBackend::SwiGluOai(ConstMat gate, ConstMat up, float alpha, float limit, Mat out) {
  op_checks::SameShape("SwiGluOai", gate, up);
  op_checks::SameShape("SwiGluOai", gate, out);
  if (Enter()) {
    RecordCuda(cuda::LaunchSwiGluOai(stream(), gate, up, alpha, limit, out), "SwiGluOai");
  }
}

void CudaBackend::Add(ConstMat a, ConstMat b, Mat out) {
  op_checks::SameShape("Add", a, b);
  op_checks::SameShape("Add", a, out);
  if (Enter()) RecordCuda(cuda::LaunchAdd(stream(), a, b, out), "Add");
}

void CudaBackend::Copy(ConstMat src, Mat dst) {
  op_checks::SameShape("Copy", src, dst);
  const size_t bytes = static_cast<size_t>(src.rows * src.cols) * sizeof(float);
  if (!Enter() || bytes == 0) return;
  RecordCuda(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, stream()),
             "Copy");
}

void CudaBackend::CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col,
                              int64_t cols) {
  op_checks::CopyColumns(src, src_col, dst, dst_col, cols);
  if (!Enter() || cols == 0 || src.rows == 0) return;
  const size_t f = sizeof(float);
  RecordCuda(cudaMemcpy2DAsync(dst.data + dst_col, static_cast<size_t>(dst.cols) * f,
                               src.data + src_col, static_cast<size_t>(src.cols) * f,
                               static_cast<size_t>(cols) * f, static_cast<size_t>(src.rows),
                               cudaMemcpyDeviceToDevice, stream()),
             "CopyColumns");
}

void CudaBackend::GatherRows(ConstMat src, const int32_t* idx, Mat dst) {
  op_checks::RowsOf("GatherRows", src, dst);
  if (Enter()) RecordCuda(cuda::LaunchGatherRows(stream(), src, idx, dst), "GatherRows");
}

void CudaBackend::ScatterAddScaled(ConstMat src, const int32_t* idx, const float* scale, Mat dst) {
  op_checks::RowsOf("ScatterAddScaled", src, dst);
  if (Enter()) {
    RecordCuda(cuda::LaunchScatterAddScaled(stream(), src, idx, scale, dst), "ScatterAddScaled");
  }
}

}  // namespace odmoe
