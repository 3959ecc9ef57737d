// The CUDA backend's products by ids (backend.h, "Experts picked by ids"):
// the ids stay in device memory, where RouterTopK wrote them; the activations
// are quantized once, and every picked weight is one slice (blockIdx.z) of a
// single launch of the plain product's kernel (cuda_kernels.h ProductSlices),
// so each output element is the plain product's chain of operations.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "backend/op_checks.h"
#include "cuda_backend.h"
#include "cuda_weight_rules.h"
#include "util/status_macros.h"

namespace odmoe {

namespace {

/// A weight table's index on the device: its entries' addresses, and the
/// largest power of two (at most 256) dividing every one of them.
class DeviceWeightIndex final : public BackendBuffer {
 public:
  DeviceWeightIndex(cuda::DeviceMemory memory, size_t size, int64_t align)
      : memory_(std::move(memory)), size_(size), align_(align) {}
  void* data() override { return memory_.data(); }
  size_t size() const override { return size_; }
  int64_t align() const { return align_; }

 private:
  cuda::DeviceMemory memory_;
  size_t size_;
  int64_t align_;
};

int64_t CommonAlignment(std::span<const WeightRef> entries) {
  int64_t align = 256;
  for (const WeightRef& w : entries) {
    while (align > 1 && reinterpret_cast<uintptr_t>(w.data) % static_cast<uintptr_t>(align) != 0) {
      align /= 2;
    }
  }
  return align;
}

}  // namespace

absl::StatusOr<WeightTable> CudaBackend::MakeWeightTable(std::span<const WeightRef> entries) {
  ODMOE_RETURN_IF_ERROR(CheckWeightTableEntries(entries));
  const WeightRef& first = entries.front();
  if (!cuda::CudaSupportsWeightType(first.type) || first.layout != WeightLayout::kRows) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a weight table of %s weights in layout %d", name(), Traits(first.type).name,
        static_cast<int>(first.layout)));
  }
  std::vector<const void*> addresses;
  for (const WeightRef& w : entries) {
    if (!cuda::WeightAligned(w.type, w.data)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: a weight table entry of %s at a misaligned device address", name(),
          Traits(w.type).name));
    }
    addresses.push_back(w.data);
  }
  ODMOE_RETURN_IF_ERROR(UseDevice());
  const size_t bytes = addresses.size() * sizeof(const void*);
  ODMOE_ASSIGN_OR_RETURN(cuda::DeviceMemory memory, cuda::DeviceMemory::Allocate(bytes));
  ODMOE_RETURN_IF_ERROR(CopyToBackend(memory.data(), addresses.data(), bytes));
  WeightTable table;
  table.entries.assign(entries.begin(), entries.end());
  table.index = std::make_unique<DeviceWeightIndex>(std::move(memory), bytes,
                                                    CommonAlignment(entries));
  table.owner = this;
  return table;
}

bool CudaBackend::SlicesOf(const WeightTable& table, const int32_t* ids, int64_t count,
                           bool shared_x, cuda::ProductSlices* slices) {
  auto* index = dynamic_cast<DeviceWeightIndex*>(table.index.get());
  if (index == nullptr) {
    return Record(absl::InvalidArgumentError(
        "a product by ids over a weight table that this backend did not make"));
  }
  slices->table = static_cast<const void* const*>(index->data());
  slices->ids = ids;
  slices->entries = table.size();
  slices->count = count;
  slices->shared_x = shared_x;
  slices->align = index->align();
  return true;
}

void CudaBackend::MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) {
  op_checks::MatMulById(this, table, x, y);
  norm_quant_.DropIfWrites(y);
  if (!EnterKeepingNormQuant() || y.rows == 0) return;
  cuda::ProductSlices slices;
  if (!SlicesOf(table, ids, y.rows, x.rows == 1, &slices)) return;
  const WeightRef& w = table.first();
  // Each slice is a one-row product: never cuBLAS; scratch for x's rows.
  const MatMulPlan plan = PlanMatMul(w.type, w.rows, w.cols, x.rows, FloatMatMulPolicy::kExact);
  if (QuantizedPath(plan.path)) {
    void* xq = QuantizeActivations(plan, x);
    if (xq != nullptr) QuantizedProduct(plan, w, x, xq, y, slices);
    return;
  }
  RecordCuda(cuda::LaunchFloatMatMul(stream(), w.type, nullptr, w.rows, w.cols, x.data, 1, y.data,
                                     slices),
             "MatMulById");
}

void CudaBackend::MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids,
                                 ConstMat x, Mat ya, Mat yb) {
  op_checks::MatMulPairById(this, a, b, x, ya, yb);
  const WeightRef& wa = a.first();
  const WeightRef& wb = b.first();
  const MatMulPlan pa = PlanMatMul(wa.type, wa.rows, wa.cols, x.rows, FloatMatMulPolicy::kExact);
  const MatMulPlan pb = PlanMatMul(wb.type, wb.rows, wb.cols, x.rows, FloatMatMulPolicy::kExact);
  if (pa.path != pb.path || !QuantizedPath(pa.path)) {
    MatMulById(a, ids, x, ya);
    MatMulById(b, ids, x, yb);
    return;
  }
  norm_quant_.DropIfWrites(ya);
  norm_quant_.DropIfWrites(yb);
  if (!EnterKeepingNormQuant() || ya.rows == 0) return;
  cuda::ProductSlices sa, sb;
  if (!SlicesOf(a, ids, ya.rows, x.rows == 1, &sa) || !SlicesOf(b, ids, yb.rows, x.rows == 1, &sb)) {
    return;
  }
  // Same path, same x: one quantization for both products (as MatMulPair);
  // weights of one type and shape (an expert's gate and up): one launch.
  void* xq = QuantizeActivations(pa, x);
  if (xq == nullptr) return;
  if (wa.SameShapeAs(wb)) {
    sa.table_b = sb.table;
    sa.y_b = yb.data;
    sa.align = std::min(sa.align, sb.align);
    QuantizedProduct(pa, wa, x, xq, ya, sa);
    return;
  }
  QuantizedProduct(pa, wa, x, xq, ya, sa);
  QuantizedProduct(pb, wb, x, xq, yb, sb);
}

void CudaBackend::SwiGluMatMulById(const WeightTable& w, const int32_t* ids, Mat gate,
                                   ConstMat up, Mat y) {
  op_checks::SwiGluMatMulById(this, w, gate, up, y);
  const WeightRef& f = w.first();
  const MatMulPlan plan = PlanMatMul(f.type, f.rows, f.cols, gate.rows, FloatMatMulPolicy::kExact);
  if (!QuantizedPath(plan.path)) {
    SwiGlu(gate, up, gate);
    MatMulById(w, ids, gate, y);
    return;
  }
  norm_quant_.DropIfWrites(gate);  // SwiGLU goes into gate
  norm_quant_.DropIfWrites(y);
  if (!EnterKeepingNormQuant() || y.rows == 0) return;
  cuda::ProductSlices slices;
  if (!SlicesOf(w, ids, y.rows, /*shared_x=*/false, &slices)) return;
  void* xq = QuantizeSwiGlu(plan, gate, up);
  if (xq != nullptr) QuantizedProduct(plan, f, gate, xq, y, slices);
}

void CudaBackend::CombineExperts(ConstMat ys, const int32_t* ids, const float* weights, int k,
                                 Mat out) {
  op_checks::CombineExperts(ys, k, out);
  if (Enter()) {
    RecordCuda(cuda::LaunchCombineExperts(stream(), ys, ids, weights, k, out), "CombineExperts");
  }
}

}  // namespace odmoe
