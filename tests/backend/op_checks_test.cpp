// The backend's always-on argument checks (backend/op_checks.h): a call that
// breaks an op's shape contract aborts with the op and the shapes, in every
// build type (this suite is built without NDEBUG-only asserts mattering).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "backend/op_checks.h"
#include "cpu_backend.h"
#include "model/expert_pack.h"

namespace odmoe::test {
namespace {

struct Outcome {
  bool aborted = false;
  std::string err;
};

// Runs `call` in a child process and reports whether it aborted, and what it
// wrote to stderr.
Outcome InChild(const std::function<void()>& call) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    call();
    _exit(0);
  }
  close(fds[1]);
  Outcome o;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) o.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  o.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return o;
}

}  // namespace

TEST_CASE("backend ops abort with the shapes on a broken contract", "[backend]") {
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 1.0f), c(64 * 64, 0.0f);
  std::vector<uint16_t> w16(64 * 64, 0);
  const WeightRef w{DType::kF16, w16.data(), 64, 64};
  struct Case {
    const char* op;
    std::function<void(CpuBackend&)> call;
  };
  const std::vector<Case> cases = {
      {"MatMul", [&](CpuBackend& be) { be.MatMul(w, ConstMat(a.data(), 2, 63), Mat{c.data(), 2, 64}); }},
      {"MatMul", [&](CpuBackend& be) { be.MatMul(w, ConstMat(a.data(), 2, 64), Mat{a.data(), 2, 64}); }},
      {"MatMulPair", [&](CpuBackend& be) {  // the first output overlaps x's second row
         be.MatMulPair(w, w, ConstMat(a.data(), 2, 64), Mat{a.data() + 64, 2, 64},
                       Mat{c.data(), 2, 64});
       }},
      {"Add", [&](CpuBackend& be) {
         be.Add(ConstMat(a.data(), 2, 8), ConstMat(b.data(), 2, 9), Mat{c.data(), 2, 8});
       }},
      {"CopyColumns", [&](CpuBackend& be) {
         be.CopyColumns(ConstMat(a.data(), 2, 8), 4, Mat{c.data(), 2, 8}, 0, 5);
       }},
      {"Attention", [&](CpuBackend& be) {
         be.Attention(ConstMat(a.data(), 1, 16), ConstMat(b.data(), 4, 8), ConstMat(b.data(), 4, 8),
                      2, 1, 8, /*pos0=*/4, 1.0f, AttentionOptions{}, Mat{c.data(), 1, 16});
       }},
      {"Rope", [&](CpuBackend& be) {
         RopeParams rope;
         rope.dims = 8;
         rope.offset = 4;
         const int32_t pos[2] = {0, 1};
         be.Rope(Mat{a.data(), 2, 16}, 8, pos, rope);
       }},
      {"RouterTopK", [&](CpuBackend& be) {
         int32_t ids[16];
         float wts[16];
         be.RouterTopK(ConstMat(a.data(), 1, 4), 5, RouterGating{}, ids, wts);
       }},
      {"MatMulById", [&](CpuBackend& be) {  // a table another backend made
         CpuBackend other(1);
         const WeightRef entries[2] = {w, w};
         const WeightTable t = other.MakeWeightTable(entries).value();
         const int32_t ids[2] = {0, 1};
         be.MatMulById(t, ids, ConstMat(a.data(), 1, 64), Mat{c.data(), 2, 64});
       }},
      {"MatMulById", [&](CpuBackend& be) {  // x of neither one row nor y's rows
         const WeightRef entries[2] = {w, w};
         const WeightTable t = be.MakeWeightTable(entries).value();
         const int32_t ids[3] = {0, 1, 0};
         be.MatMulById(t, ids, ConstMat(a.data(), 2, 64), Mat{c.data(), 3, 64});
       }},
      {"RopePair", [&](CpuBackend& be) {  // q and k of different rows
         RopeParams rope;
         rope.dims = 8;
         const int32_t pos[2] = {0, 1};
         be.RopePair(Mat{a.data(), 2, 16}, Mat{b.data(), 1, 8}, 8, pos, rope);
       }},
      {"AddRmsNorm", [&](CpuBackend& be) {  // y is x
         be.AddRmsNorm(Mat{a.data(), 2, 8}, ConstMat(b.data(), 2, 8), b.data(), 1e-5f,
                       Mat{a.data(), 2, 8});
       }},
      {"CombineExperts", [&](CpuBackend& be) {  // ys of the wrong number of rows
         const int32_t ids[4] = {0, 1, 0, 1};
         const float wts[4] = {1, 1, 1, 1};
         be.CombineExperts(ConstMat(a.data(), 3, 8), ids, wts, 2, Mat{c.data(), 2, 8});
       }},
  };
  for (const Case& k : cases) {
    INFO(k.op);
    const Outcome o = InChild([&] {
      CpuBackend be(1);
      k.call(be);
    });
    CHECK(o.aborted);
    CHECK(o.err.find(std::string("backend op ") + k.op) != std::string::npos);
  }
  // A call within the contract runs.
  const Outcome fine = InChild([&] {
    CpuBackend be(1);
    be.Add(ConstMat(a.data(), 2, 8), ConstMat(b.data(), 2, 8), Mat{c.data(), 2, 8});
  });
  CHECK(!fine.aborted);
  CHECK(fine.err.empty());
}

TEST_CASE("a weight in another backend's own layout is refused where only row order is read",
          "[backend]") {
  const WeightRef rows{DType::kQ4_K, nullptr, 16, 256};
  WeightRef own = rows;
  own.layout = WeightLayout::kInterleaved16;
  const Outcome refused = InChild([&] { op_checks::RowOrder("MatMul", own); });
  CHECK(refused.aborted);
  CHECK(refused.err.find("backend op MatMul") != std::string::npos);
  CHECK(refused.err.find("another backend's own layout") != std::string::npos);
  const Outcome fine = InChild([&] { op_checks::RowOrder("MatMul", rows); });
  CHECK(!fine.aborted);
  // PackExpert cannot arrange a matrix in a backend's layout without the backend.
  ExpertPackLayout layout;
  layout.gate_type = layout.up_type = layout.down_type = DType::kF32;
  layout.gate_layout = WeightLayout::kInterleaved16;
  std::vector<float> m(4, 1.0f), dst(16, 0.0f);
  ExpertTensors t;
  for (TensorView* v : {&t.gate, &t.up, &t.down}) {
    v->type = DType::kF32;
    v->n_dims = 2;
    v->ne = {2, 2, 1, 1};
    v->data = m.data();
  }
  layout.up_offset = 16;
  layout.down_offset = 32;
  const Outcome no_backend = InChild(
      [&] { PackExpert(t, layout, reinterpret_cast<uint8_t*>(dst.data()), /*backend=*/nullptr); });
  CHECK(no_backend.aborted);
  CHECK(no_backend.err.find("PackExpert") != std::string::npos);
}

}  // namespace odmoe::test
