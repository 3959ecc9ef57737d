// Always-on argument checks at the backend interface: each op's shape
// contract (backend.h) as a few integer comparisons, in every build type.
// A violation is a programming error inside odmoe (everything that comes
// from outside is validated before it reaches an op), so it aborts with the
// op and the shapes rather than reading or writing out of bounds.
//
//   void CpuBackend::MatMul(const WeightRef& w, ConstMat x, Mat y) {
//     op_checks::MatMul(w, x, y);   // "backend op MatMul: x is 3 x 63, w 128 x 64, y 3 x 128"
//     ...
//   }
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/backend.h"

namespace odmoe::op_checks {

[[noreturn]] inline void Fail(const char* op, const std::string& what) {
  std::fprintf(stderr, "odmoe: backend op %s called with bad arguments: %s\n", op, what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string Dims(const char* name, int64_t rows, int64_t cols) {
  return std::string(name) + " " + std::to_string(rows) + " x " + std::to_string(cols);
}

inline void SameShape(const char* op, ConstMat a, ConstMat b) {
  if (a.rows != b.rows || a.cols != b.cols || a.rows < 0 || a.cols < 0) {
    Fail(op, Dims("a", a.rows, a.cols) + ", " + Dims("b", b.rows, b.cols));
  }
}

inline void MatMul(const WeightRef& w, ConstMat x, Mat y) {
  if (x.cols != w.cols || y.cols != w.rows || x.rows != y.rows || x.rows < 0 ||
      (x.data == y.data && x.rows > 0)) {
    Fail("MatMul", Dims("x", x.rows, x.cols) + ", " + Dims("w", w.rows, w.cols) + ", " +
                       Dims("y", y.rows, y.cols) + (x.data == y.data ? " (y aliases x)" : ""));
  }
}

/// MatMulPair: both products' shapes, and the first output must not overlap
/// x (the second product reads x after the first is written).
inline void MatMulPair(const WeightRef& a, const WeightRef& b, ConstMat x, Mat ya, Mat yb) {
  MatMul(a, x, ya);
  MatMul(b, x, yb);
  const float* x_end = x.data + x.rows * x.cols;
  const float* ya_end = ya.data + ya.rows * ya.cols;
  if (x.rows > 0 && ya.data < x_end && x.data < ya_end) {
    Fail("MatMulPair", "the first output overlaps x");
  }
}

/// MatMulById: a non-empty table made by `self` (the backend running the
/// op), x of y.rows rows or of one, y not overlapping x.
inline void MatMulById(const Backend* self, const WeightTable& table, ConstMat x, Mat y) {
  if (table.entries.empty()) Fail("MatMulById", "an empty weight table");
  if (table.owner != self) Fail("MatMulById", "a weight table made by another backend");
  const WeightRef& w = table.first();
  const float* x_end = x.data + x.rows * x.cols;
  const float* y_end = y.data + y.rows * y.cols;
  const bool overlap = y.rows > 0 && x.rows > 0 && y.data < x_end && x.data < y_end;
  if (x.cols != w.cols || y.cols != w.rows || y.rows < 0 || (x.rows != y.rows && x.rows != 1) ||
      overlap) {
    Fail("MatMulById", Dims("x", x.rows, x.cols) + ", " + Dims("entries", w.rows, w.cols) + ", " +
                           Dims("y", y.rows, y.cols) + (overlap ? " (y overlaps x)" : ""));
  }
}

/// AddRmsNorm: x, a and y of one shape, y overlapping neither x nor a.
inline void AddRmsNorm(Mat x, ConstMat a, Mat y) {
  SameShape("AddRmsNorm", x, a);
  SameShape("AddRmsNorm", x, y);
  const int64_t n = x.rows * x.cols;
  const bool overlap = n > 0 && ((y.data < x.data + n && x.data < y.data + n) ||
                                 (y.data < a.data + n && a.data < y.data + n));
  if (overlap) Fail("AddRmsNorm", "y overlaps x or a");
}

/// MatMulPairById: both products' contracts, tables of one size, outputs of
/// one row count.
inline void MatMulPairById(const Backend* self, const WeightTable& a, const WeightTable& b,
                           ConstMat x, Mat ya, Mat yb) {
  MatMulById(self, a, x, ya);
  MatMulById(self, b, x, yb);
  if (a.size() != b.size() || ya.rows != yb.rows) {
    Fail("MatMulPairById", "tables of different sizes, or outputs of different rows");
  }
}

/// SwiGluMatMulById: gate and up of one shape, the product's contract, a
/// gate row per output row.
inline void SwiGluMatMulById(const Backend* self, const WeightTable& w, Mat gate, ConstMat up,
                             Mat y) {
  SameShape("SwiGluMatMulById", gate, up);
  MatMulById(self, w, gate, y);
  if (gate.rows != y.rows) Fail("SwiGluMatMulById", "gate and y differ in rows");
}

/// CombineExperts: k >= 1 slots per row, ys of out.rows * k rows as wide as
/// out, out not overlapping ys.
inline void CombineExperts(ConstMat ys, int k, Mat out) {
  const float* ys_end = ys.data + ys.rows * ys.cols;
  const float* out_end = out.data + out.rows * out.cols;
  const bool overlap = out.rows > 0 && ys.rows > 0 && out.data < ys_end && ys.data < out_end;
  if (k < 1 || out.rows < 0 || ys.rows != out.rows * k || ys.cols != out.cols || overlap) {
    Fail("CombineExperts", Dims("ys", ys.rows, ys.cols) + ", " + Dims("out", out.rows, out.cols) +
                               ", k " + std::to_string(k) + (overlap ? " (out overlaps ys)" : ""));
  }
}

/// For the backends that read weights in row order only: `w` must not be in
/// a layout another backend made for itself (WeightLayout).
inline void RowOrder(const char* op, const WeightRef& w) {
  if (w.layout != WeightLayout::kRows) {
    Fail(op, "the weight is in another backend's own layout (" +
                 std::to_string(static_cast<int>(w.layout)) + "), not in row order");
  }
}

inline void GetRows(const WeightRef& table, Mat out) {
  if (out.cols != table.cols || out.rows < 0) {
    Fail("GetRows", Dims("table", table.rows, table.cols) + ", " + Dims("out", out.rows, out.cols));
  }
}

inline void Rope(Mat x, int head_dim, const RopeParams& rope) {
  if (head_dim <= 0 || x.cols % head_dim != 0 || rope.dims < 2 || rope.dims % 2 != 0 ||
      rope.offset < 0 || rope.offset + rope.dims > head_dim) {
    Fail("Rope", Dims("x", x.rows, x.cols) + ", head_dim " + std::to_string(head_dim) + ", dims " +
                     std::to_string(rope.dims) + " at " + std::to_string(rope.offset));
  }
}

/// RopePair: each matrix Rope's contract, the same rows, no overlap.
inline void RopePair(Mat a, Mat b, int head_dim, const RopeParams& rope) {
  Rope(a, head_dim, rope);
  Rope(b, head_dim, rope);
  const bool overlap = a.rows > 0 && b.rows > 0 && a.data < b.data + b.rows * b.cols &&
                       b.data < a.data + a.rows * a.cols;
  if (a.rows != b.rows || overlap) {
    Fail("RopePair", Dims("a", a.rows, a.cols) + ", " + Dims("b", b.rows, b.cols) +
                         (overlap ? " (overlapping)" : ""));
  }
}

inline void Attention(ConstMat q, ConstMat k_cache, ConstMat v_cache, int n_head, int n_head_kv,
                      int head_dim, int pos0, const AttentionOptions& options, Mat out) {
  const int64_t vd = options.v_head_dim > 0 ? options.v_head_dim : head_dim;
  const bool ok = n_head_kv > 0 && n_head > 0 && head_dim > 0 && n_head % n_head_kv == 0 &&
                  pos0 >= 0 && q.cols == int64_t{n_head} * head_dim &&
                  k_cache.cols == int64_t{n_head_kv} * head_dim &&
                  k_cache.rows >= pos0 + q.rows && v_cache.cols >= n_head_kv * vd &&
                  v_cache.rows >= pos0 + q.rows && out.cols == n_head * vd &&
                  out.rows == q.rows && options.window >= 0;
  if (!ok) {
    Fail("Attention", Dims("q", q.rows, q.cols) + ", " + Dims("k", k_cache.rows, k_cache.cols) +
                          ", " + Dims("v", v_cache.rows, v_cache.cols) + ", " +
                          Dims("out", out.rows, out.cols) + ", heads " + std::to_string(n_head) +
                          "/" + std::to_string(n_head_kv) + " of " + std::to_string(head_dim) +
                          " (v " + std::to_string(vd) + "), pos0 " + std::to_string(pos0) +
                          ", window " + std::to_string(options.window));
  }
}

inline void RouterTopK(ConstMat logits, int k) {
  if (k < 1 || k > logits.cols) {
    Fail("RouterTopK", Dims("logits", logits.rows, logits.cols) + ", k " + std::to_string(k));
  }
}

inline void CopyColumns(ConstMat src, int64_t src_col, Mat dst, int64_t dst_col, int64_t cols) {
  if (src.rows != dst.rows || cols < 0 || src_col < 0 || dst_col < 0 ||
      src_col + cols > src.cols || dst_col + cols > dst.cols) {
    Fail("CopyColumns", Dims("src", src.rows, src.cols) + " from " + std::to_string(src_col) +
                            ", " + Dims("dst", dst.rows, dst.cols) + " from " +
                            std::to_string(dst_col) + ", " + std::to_string(cols) + " columns");
  }
}

inline void RowsOf(const char* op, ConstMat src, Mat dst) {
  if (src.cols != dst.cols || src.rows < 0 || dst.rows < 0) {
    Fail(op, Dims("src", src.rows, src.cols) + ", " + Dims("dst", dst.rows, dst.cols));
  }
}

}  // namespace odmoe::op_checks
