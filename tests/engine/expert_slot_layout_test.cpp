// Experts packed in a host backend's own slot layout (ExpertPackLayout::
// WithSlotLayouts, PackExpert with the backend: the CPU backend's
// KInterleave16 for K-family matrices where its ISA decodes it) compute the
// bits of the same expert packed in the file's row order, for one row and
// for a batch, on every ISA.
#include <cstring>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_isa.h"
#include "engine/expert_ffn.h"
#include "model/expert_pack.h"
#include "tensor/quant.h"

namespace odmoe::test {
namespace {

/// rows x cols random weights of `type` as a 2-D tensor view over `bytes`.
TensorView RandomMatrix(DType type, int64_t rows, int64_t cols, std::mt19937& rng,
                        std::vector<uint8_t>* bytes) {
  const size_t row_bytes = RowBytes(type, cols);
  bytes->resize(row_bytes * static_cast<size_t>(rows));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    QuantizeRow(type, row.data(), bytes->data() + r * row_bytes, cols);
  }
  TensorView v;
  v.name = "expert";
  v.type = type;
  v.n_dims = 2;
  v.ne = {cols, rows, 1, 1};
  v.data = bytes->data();
  return v;
}

TEST_CASE("expert pack: slot layouts of a host backend keep the row-order bits",
          "[engine][kquant]") {
  std::mt19937 rng(31);
  const int64_t n_embd = 256, n_ff = 512;
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ2_K, DType::kIQ4_XS}) {
    ModelConfig c;
    c.n_layer = 1;
    c.n_embd = n_embd;
    c.n_ff = n_ff;
    c.expert_storage = {ExpertStorage{type, type, type}};
    const ExpertPackLayout rows = ExpertPackLayout::For(c, 0);
    std::vector<uint8_t> g, u, d;
    ExpertTensors t;
    t.gate = RandomMatrix(type, n_ff, n_embd, rng, &g);
    t.up = RandomMatrix(type, n_ff, n_embd, rng, &u);
    t.down = RandomMatrix(type, n_embd, n_ff, rng, &d);
    std::vector<float> x(static_cast<size_t>(3 * n_embd));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    for (CpuIsa isa : SupportedCpuIsas()) {
      CpuBackend be(2, isa);
      const ExpertPackLayout own = rows.WithSlotLayouts(be);
      const WeightLayout want = be.SlotLayout(type, n_ff, n_embd);
      INFO(Traits(type).name << " " << CpuIsaName(be.isa()));
      CHECK(own.gate_layout == want);
      CHECK(own.down_layout == be.SlotLayout(type, n_embd, n_ff));
      CHECK(own.total_bytes == rows.total_bytes);
      std::vector<uint8_t> plain(rows.total_bytes), arranged(own.total_bytes);
      PackExpert(t, rows, plain.data());
      PackExpert(t, own, arranged.data(), &be);
      CHECK((plain != arranged) == (want != WeightLayout::kRows));
      const ExpertWeights wp = rows.WeightsAt(plain.data());
      const ExpertWeights wa = own.WeightsAt(arranged.data());
      CHECK(wa.gate.layout == want);
      auto scratch = ExpertFfnScratch::Create(be, n_ff, 3);
      REQUIRE(scratch.ok());
      for (int64_t n : {int64_t{1}, int64_t{3}}) {
        std::vector<float> yp(static_cast<size_t>(n * n_embd)), ya(yp.size());
        RunExpertFfn(be, wp, ConstMat(x.data(), n, n_embd), *scratch, Mat{yp.data(), n, n_embd});
        RunExpertFfn(be, wa, ConstMat(x.data(), n, n_embd), *scratch, Mat{ya.data(), n, n_embd});
        INFO("rows " << n);
        CHECK(std::memcmp(yp.data(), ya.data(), yp.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("expert pack: ODMOE_CPU_REPACK off keeps slots in row order", "[engine][kquant]") {
  CpuBackend be(1);
  be.set_repack_weights(false);
  CHECK(be.SlotLayout(DType::kQ4_K, 512, 256) == WeightLayout::kRows);
  CHECK(be.SlotLayout(DType::kQ8_0, 512, 256) == WeightLayout::kRows);
  be.set_repack_weights(true);
  CHECK(be.SlotLayout(DType::kQ4_K, 15, 256) == WeightLayout::kRows);  // no whole group
  CHECK(be.SlotLayout(DType::kF16, 512, 256) == WeightLayout::kRows);
}

}  // namespace
}  // namespace odmoe::test
