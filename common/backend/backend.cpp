// Backend's default implementations (backend.h): the fused ops as the plain
// ops they stand for, teacher-forced scores read on the host, and the ops by
// ids as the ids read on the host, then the plain ops row by row.
#include "backend/backend.h"

#include "backend/op_checks.h"

namespace odmoe {

namespace {

/// `n` ids of backend memory readable on the host: `ids` itself on a host
/// backend, else a copy in *copy (a wait for the device); null when the copy
/// failed (the backend reports its error from then on).
const int32_t* HostIds(Backend& be, const int32_t* ids, int64_t n, std::vector<int32_t>* copy) {
  if (be.host_memory()) return ids;
  copy->resize(static_cast<size_t>(n));
  if (!be.CopyToHost(copy->data(), ids, copy->size() * sizeof(int32_t)).ok()) return nullptr;
  return copy->data();
}

/// Calls fn(entry, j) for every row j of a product by ids whose id is in the
/// table (rows with other ids are left unwritten).
template <class Fn>
void ForEachPicked(Backend& be, const WeightTable& table, const int32_t* ids, int64_t rows,
                   Fn&& fn) {
  std::vector<int32_t> copy;
  const int32_t* at = HostIds(be, ids, rows, &copy);
  if (at == nullptr) return;
  for (int64_t j = 0; j < rows; ++j) {
    if (at[j] >= 0 && at[j] < table.size()) fn(table.entries[static_cast<size_t>(at[j])], j);
  }
}

}  // namespace

void Backend::AddRmsNorm(Mat x, ConstMat a, const float* weight, float eps, Mat y) {
  op_checks::AddRmsNorm(x, a, y);
  Add(x, a, x);
  RmsNorm(x, weight, eps, y);
}

void Backend::RopePair(Mat a, Mat b, int head_dim, const int32_t* positions,
                       const RopeParams& rope) {
  op_checks::RopePair(a, b, head_dim, rope);
  Rope(a, head_dim, positions, rope);
  Rope(b, head_dim, positions, rope);
}

absl::Status Backend::CheckLogitRows(ConstMat logits) {
  if (logits.rows > 0 && logits.cols < 1) {
    return absl::InvalidArgumentError("ScoreLogitRows: rows of no logits");
  }
  return absl::OkStatus();
}

absl::Status Backend::ScoreLogitRowsOnHost(ConstMat logits, const int32_t* targets,
                                           LogitRowScore* out, bool copy) {
  ODMOE_RETURN_IF_ERROR(CheckLogitRows(logits));
  std::vector<float> host;
  const float* rows = logits.data;
  if (copy) {
    host.resize(static_cast<size_t>(logits.rows * logits.cols));
    ODMOE_RETURN_IF_ERROR(CopyToHost(host.data(), logits.data, host.size() * sizeof(float)));
    rows = host.data();
  } else {
    ODMOE_RETURN_IF_ERROR(Synchronize());
  }
  for (int64_t r = 0; r < logits.rows; ++r) {
    out[r] = ScoreLogitRow(rows + r * logits.cols, logits.cols, targets[r]);
  }
  return absl::OkStatus();
}

absl::Status Backend::CheckWeightTableEntries(std::span<const WeightRef> entries) {
  if (entries.empty()) return absl::InvalidArgumentError("a weight table of no weights");
  const WeightRef& f = entries.front();
  for (const WeightRef& w : entries) {
    if (!w.SameShapeAs(f) || w.data == nullptr) {
      return absl::InvalidArgumentError(
          "a weight table's entries differ in type, shape or layout, or have no data");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WeightTable> Backend::MakeWeightTable(std::span<const WeightRef> entries) {
  ODMOE_RETURN_IF_ERROR(CheckWeightTableEntries(entries));
  WeightTable table;
  table.entries.assign(entries.begin(), entries.end());
  table.owner = this;
  return table;
}

void Backend::MatMulById(const WeightTable& table, const int32_t* ids, ConstMat x, Mat y) {
  op_checks::MatMulById(this, table, x, y);
  ForEachPicked(*this, table, ids, y.rows, [&](const WeightRef& w, int64_t j) {
    MatMul(w, x.RowRange(x.rows == 1 ? 0 : j, 1), y.RowRange(j, 1));
  });
}

void Backend::MatMulPairById(const WeightTable& a, const WeightTable& b, const int32_t* ids,
                             ConstMat x, Mat ya, Mat yb) {
  op_checks::MatMulPairById(this, a, b, x, ya, yb);
  ForEachPicked(*this, a, ids, ya.rows, [&](const WeightRef& wa, int64_t j) {
    const WeightRef& wb = b.entries[static_cast<size_t>(&wa - a.entries.data())];
    MatMulPair(wa, wb, x.RowRange(x.rows == 1 ? 0 : j, 1), ya.RowRange(j, 1), yb.RowRange(j, 1));
  });
}

void Backend::SwiGluMatMulById(const WeightTable& w, const int32_t* ids, Mat gate, ConstMat up,
                               Mat y) {
  op_checks::SwiGluMatMulById(this, w, gate, up, y);
  SwiGlu(gate, up, gate);  // every row, as the op says (SwiGluMatMul's first step)
  MatMulById(w, ids, gate, y);
}

}  // namespace odmoe
