// Op tests in the style of ggml's test-backend-ops:
//  1. the CPU backend against the plain double-precision references of
//     reference_ops.h, one test per op, with the tolerances of op_cases.cpp;
//  2. every backend this machine offers (AvailableBackends(), plus "cpu:3")
//     against "cpu" on the same cases. A backend family that is compiled in
//     but has no hardware here is simply not listed, so its cases are skipped.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "cpu_kquant.h"
#include "op_cases.h"
#include "reference_ops.h"

namespace odmoe::test {
namespace {

/// Runs every case whose name starts with `op` on `be` against the reference.
int CheckAgainstReference(Backend& be, const std::string& op) {
  int checked = 0;
  for (const OpCase& c : MakeOpCases()) {
    if (c.name.rfind(op, 0) != 0) continue;
    const std::vector<float> got = c.run(be);
    const std::vector<double> want = c.reference();
    INFO(c.name);
    REQUIRE(got.size() == want.size());
    CHECK(ref::Nmse(got, want) <= c.max_nmse);
    CHECK(ref::MaxRelError(got, want) <= c.max_rel);
    ++checked;
  }
  return checked;
}

void CheckCpuOp(const std::string& op) {
  CpuBackend be(2);
  CHECK(CheckAgainstReference(be, op) > 0);
}

TEST_CASE("cpu MatMul matches the reference for every weight type and shape", "[backend]") {
  CheckCpuOp("MatMul");
}
TEST_CASE("cpu GetRows matches the reference", "[backend]") { CheckCpuOp("GetRows"); }
TEST_CASE("cpu RmsNorm matches the reference", "[backend]") { CheckCpuOp("RmsNorm"); }
TEST_CASE("cpu Rope matches the reference", "[backend]") { CheckCpuOp("Rope"); }
TEST_CASE("cpu Attention matches the reference", "[backend]") { CheckCpuOp("Attention"); }
TEST_CASE("cpu Rope with YaRN and at an offset matches transformers' formulas", "[backend]") {
  CheckCpuOp("Rope yarn");
  CheckCpuOp("Rope offset");
}
TEST_CASE("cpu Attention with sinks, sliding windows and V head sizes matches the reference",
          "[backend]") {
  for (const char* op :
       {"Attention sinks", "Attention window", "Attention v_head_dim", "Attention v in k"}) {
    CheckCpuOp(op);
  }
}
TEST_CASE("cpu RouterTopK with sigmoid scores and groups matches DeepSeek-V3's router",
          "[backend]") {
  CheckCpuOp("RouterTopK sigmoid");
}
TEST_CASE("cpu SwiGluOai matches transformers' clamped SwiGLU", "[backend]") {
  CheckCpuOp("SwiGluOai");
}
TEST_CASE("cpu GeGlu SoftCap and Scale match their definitions (Gemma 4)", "[backend]") {
  CheckCpuOp("GeGlu");
  CheckCpuOp("SoftCap");
  CheckCpuOp("Scale");
  CheckCpuOp("Rope proportional");
}

TEST_CASE("RopeInverseFrequencies equals transformers' YaRN for the golden models' configs",
          "[backend]") {
  // _compute_yarn_parameters (transformers 5.24, float32) on the hf_config of
  // tests/data/arch/gpt-oss_golden.json (truncate false) and
  // deepseek2_golden.json (truncate defaults to true).
  RopeParams gpt_oss;
  gpt_oss.dims = 32;
  gpt_oss.freq_base = 172235.125f;
  gpt_oss.mode = RopeMode::kHalf;
  gpt_oss.scaling = {RopeScalingType::kYarn, 32.0f, 128, 32.0f, 1.0f, 1.0f, false};
  const double gpt_oss_hf[] = {1.000000000e+00, 3.567008376e-01, 1.142401174e-01, 2.851575986e-02,
                               1.533979550e-03, 7.220411790e-04, 3.398633853e-04, 1.599730313e-04,
                               7.529898721e-05, 3.544308856e-05, 1.668299228e-05, 7.852651834e-06,
                               3.696227850e-06, 1.739807203e-06, 8.189238656e-07, 3.854658530e-07};
  RopeParams deepseek;
  deepseek.dims = 8;
  deepseek.freq_base = 10000.0f;
  deepseek.scaling = {RopeScalingType::kYarn, 4.0f, 128, 32.0f, 1.0f, 1.0f, true};
  const double deepseek_hf[] = {1.000000000e+00, 6.250000000e-02, 2.499999944e-03, 2.500000119e-04};
  const std::vector<double> a = RopeInverseFrequencies(gpt_oss);
  const std::vector<double> b = RopeInverseFrequencies(deepseek);
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 4);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(gpt_oss_hf[i]).epsilon(1e-6));
  for (size_t i = 0; i < b.size(); ++i) CHECK(b[i] == Approx(deepseek_hf[i]).epsilon(1e-6));
  // The attention factors transformers derives (gpt-oss: from the factor;
  // DeepSeek: mscale / mscale_all_dim, both 0.707).
  CHECK(YarnAttentionFactor(32.0) == Approx(1.3465735902799727).epsilon(1e-15));
  CHECK(YarnAttentionFactor(4.0, 0.707, 0.707) == 1.0);
  CHECK(YarnAttentionFactor(1.0) == 1.0);
  // Without scaling, the plain table: base^(-2i/dims) exactly.
  RopeParams plain = deepseek;
  plain.scaling.type = RopeScalingType::kNone;
  const std::vector<double> c = RopeInverseFrequencies(plain);
  for (int i = 0; i < 4; ++i) CHECK(c[i] == std::pow(10000.0, -2.0 * i / 8));
  CHECK(RopeAttentionFactor(plain) == 1.0);
}

TEST_CASE("cpu Softmax matches the reference", "[backend]") { CheckCpuOp("Softmax"); }
TEST_CASE("cpu SwiGlu matches the reference", "[backend]") { CheckCpuOp("SwiGlu"); }
TEST_CASE("cpu RouterTopK matches the reference for every gating, ties to the lower id",
          "[backend]") {
  CheckCpuOp("RouterTopK");
}
TEST_CASE("cpu Sigmoid and AddBias match the reference", "[backend]") {
  CheckCpuOp("Sigmoid");
  CheckCpuOp("AddBias");
}
TEST_CASE("cpu Add, Copy, CopyColumns, GatherRows, ScatterAddScaled match the reference",
          "[backend]") {
  for (const char* op : {"Add", "Copy", "CopyColumns", "GatherRows", "ScatterAddScaled"}) {
    CheckCpuOp(op);
  }
}

TEST_CASE(
    "cpu Mul and the linear-attention ops (CausalConvSilu and GatedDeltaNet) match the "
    "reference",
    "[backend]") {
  for (const char* op : {"Mul", "CausalConvSilu", "GatedDeltaNet"}) CheckCpuOp(op);
}

TEST_CASE("cpu Mamba-2 ops (CausalConvBiasSilu and Mamba2Scan and GroupRmsNormGated) match the "
          "reference",
          "[backend]") {
  for (const char* op : {"CausalConvBiasSilu", "Mamba2Scan", "GroupRmsNormGated"}) CheckCpuOp(op);
}

TEST_CASE("the reference catches a wrong result", "[backend]") {
  // Guards the guard: a MatMul case checked against another case's reference
  // must fail the tolerance.
  const std::vector<OpCase> cases = MakeOpCases();
  CpuBackend be(1);
  const std::vector<float> got = cases[0].run(be);
  std::vector<double> want = cases[0].reference();
  want[want.size() / 2] += 0.01 * std::fabs(want[want.size() / 2]) + 1e-3;
  CHECK(ref::Nmse(got, want) > cases[0].max_nmse);
}

std::vector<std::string> BackendsToCompare() {
  std::vector<std::string> names = {"cpu:3"};  // another thread count of the reference
  const std::vector<std::string> available = AvailableBackends();
  for (const std::string& n : available) {
    if (n != "cpu") names.push_back(n);
  }
  // Say which compiled-in families have no hardware here (their GPU cases
  // are skipped, e.g. "cuda" on a machine without a usable GPU).
  for (const std::string& family : CompiledBackendFamilies()) {
    const bool listed = std::any_of(available.begin(), available.end(), [&](const std::string& n) {
      return n == family || n.rfind(family + ":", 0) == 0;
    });
    if (!listed) WARN("backend family '" << family << "' is compiled in but unavailable here");
  }
  return names;
}

/// Whether `be` loads weights of `type` (a backend may compute with fewer
/// types than the CPU reference: its cases for the others are skipped).
bool AcceptsWeightType(Backend& be, DType type) {
  const int64_t cols = Traits(type).block_elems;
  std::vector<uint8_t> bytes(RowBytes(type, cols), 0);
  TensorView view;
  view.name = "probe";
  view.type = type;
  view.n_dims = 2;
  view.ne = {cols, 1, 1, 1};
  view.data = bytes.data();
  return be.LoadWeight(view).ok();
}

TEST_CASE("every available backend matches cpu on every op", "[backend]") {
  auto cpu = CreateBackend("cpu");
  REQUIRE(cpu.ok());
  const std::vector<OpCase> cases = MakeOpCases();
  for (const std::string& name : BackendsToCompare()) {
    auto be = CreateBackend(name);
    if (!be.ok()) {
      WARN("skipping backend " << name << ": " << be.status().ToString());
      continue;
    }
    std::vector<DType> refused;
    for (const OpCase& c : cases) {
      if (!AcceptsWeightType(**be, c.weight_type)) {
        if (std::find(refused.begin(), refused.end(), c.weight_type) == refused.end()) {
          refused.push_back(c.weight_type);
          WARN(name << " does not load " << Traits(c.weight_type).name << " weights: skipped");
        }
        continue;
      }
      INFO(name << ": " << c.name);
      const std::vector<float> got = c.run(**be);
      const std::vector<float> want = c.run(**cpu);
      REQUIRE(got.size() == want.size());
      CHECK(ref::Nmse(got, want) <= c.max_nmse);
      CHECK(ref::MaxRelError(got, want) <= c.max_rel);
    }
  }
}

/// Argmax as its definition reads: the first index whose value no later
/// one exceeds (NaN never does).
int32_t SerialArgmax(const std::vector<float>& x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST_CASE("ArgmaxOf: the first largest value, NaN never larger, every length", "[backend]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int checked = 0;
  for (int64_t n : {1, 2, 15, 16, 17, 33, 1000, 32000}) {
    for (int variant = 0; variant < 6; ++variant) {
      std::vector<float> x = ref::RandomFloats(n, 90 + variant, -8, 8);
      if (variant == 1) x.assign(static_cast<size_t>(n), 1.5f);       // all tied
      if (variant == 2) x[static_cast<size_t>(n / 2)] = nan;          // a NaN inside
      if (variant == 3) x[0] = nan;                                   // NaN first: 0
      if (variant == 4) {                                             // the max twice
        x[static_cast<size_t>(n - 1)] = 9.0f;
        x[static_cast<size_t>(n / 3)] = 9.0f;
      }
      if (variant == 5) {  // only zeros of both signs
        for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = i % 3 == 0 ? -0.0f : 0.0f;
      }
      INFO("n " << n << " variant " << variant);
      CHECK(ArgmaxOf(x.data(), n) == SerialArgmax(x));
      ++checked;
    }
  }
  CHECK(checked == 48);
}

TEST_CASE("every backend scores rows of logits with ScoreLogitRow's bits", "[backend]") {
  const int64_t rows = 7, vocab = 1000;
  std::vector<float> logits = ref::RandomFloats(rows * vocab, 77, -12, 12);
  logits[1 * vocab + 3] = logits[1 * vocab + 500] = 40.0f;  // row 1: a tie for the max
  logits[2 * vocab] = std::numeric_limits<float>::quiet_NaN();  // row 2: NaN first
  logits[3 * vocab + 10] = std::numeric_limits<float>::quiet_NaN();  // row 3: NaN inside
  const std::vector<int32_t> targets = {5, 500, 2, 999, -1, 1000, 0};  // -1, past the end
  const std::vector<std::string> names = EveryBackendName();
  for (const std::string& name : names) {
    auto be = CreateBackend(name);
    REQUIRE(be.ok());
    DeviceData d(**be);
    const float* dl = d.Floats(logits);
    std::vector<LogitRowScore> got(static_cast<size_t>(rows));
    REQUIRE((*be)->ScoreLogitRows(ConstMat(dl, rows, vocab), targets.data(), got.data()).ok());
    for (int64_t r = 0; r < rows; ++r) {
      const LogitRowScore want = ScoreLogitRow(logits.data() + r * vocab, vocab, targets[r]);
      INFO(name << " row " << r);
      CHECK(got[r].top1 == want.top1);
      CHECK(std::memcmp(&got[r].target_logprob, &want.target_logprob, sizeof(double)) == 0);
      CHECK(std::memcmp(&got[r].log_sum, &want.log_sum, sizeof(double)) == 0);
    }
    CHECK(got[1].top1 == 3);
    CHECK(got[2].top1 == 0);
    CHECK(got[4].target_logprob == 0.0);
    CHECK(got[5].target_logprob == 0.0);
    CHECK(std::exp(got[0].target_logprob) > 0.0);
    CHECK(!(*be)->ScoreLogitRows(ConstMat(dl, 1, 0), targets.data(), got.data()).ok());
  }
}

TEST_CASE("Backend's default ScoreLogitRows gives the reference's bits, on host or copied",
          "[backend]") {
  const int64_t rows = 5, vocab = 333;
  std::vector<float> logits = ref::RandomFloats(rows * vocab, 78, -9, 9);
  logits[2 * vocab + 7] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<int32_t> targets = {0, 332, 7, -1, 100};
  CpuBackend be(1);
  for (bool copy : {false, true}) {  // a host backend's path, a device backend's
    std::vector<LogitRowScore> got(static_cast<size_t>(rows));
    REQUIRE(be.ScoreLogitRowsOnHost(ConstMat(logits.data(), rows, vocab), targets.data(),
                                    got.data(), copy)
                .ok());
    for (int64_t r = 0; r < rows; ++r) {
      const LogitRowScore want = ScoreLogitRow(logits.data() + r * vocab, vocab, targets[r]);
      INFO("copy " << copy << " row " << r);
      CHECK(got[r].top1 == want.top1);
      CHECK(std::memcmp(&got[r].target_logprob, &want.target_logprob, sizeof(double)) == 0);
      CHECK(std::memcmp(&got[r].log_sum, &want.log_sum, sizeof(double)) == 0);
    }
    CHECK(!be.ScoreLogitRowsOnHost(ConstMat(logits.data(), 2, 0), targets.data(), got.data(),
                                   copy)
               .ok());
  }
}

TEST_CASE("cpu Allocate puts buffers of 2 MiB and more on 2 MiB boundaries", "[backend]") {
  CpuBackend be(1);
  for (size_t bytes : {size_t{1}, size_t{4096}, (size_t{2} << 20) - 64}) {
    auto b = be.Allocate(bytes);
    REQUIRE(b.ok());
    CHECK(reinterpret_cast<uintptr_t>((*b)->data()) % 64 == 0);
  }
  for (size_t bytes : {size_t{2} << 20, (size_t{5} << 20) + 3}) {
    auto b = be.Allocate(bytes);
    REQUIRE(b.ok());
    CHECK(reinterpret_cast<uintptr_t>((*b)->data()) % (size_t{2} << 20) == 0);
    std::memset((*b)->data(), 7, bytes);  // the whole size is usable
  }
}

TEST_CASE("cpu LoadWeight copies the K-family weights it could interleave", "[backend]") {
  // A Q6_K weight of 4.2 MiB: interleaved where the ISA has the kernels and
  // decode pays, else (Zen 4) a row-order copy; a view with repacking off or
  // without the kernels.
  const int64_t rows = 1024, cols = 4096;
  const std::vector<uint8_t> bytes = RandomWeight(DType::kQ6_K, rows, cols, 3);
  TensorView v;
  v.name = "w";
  v.type = DType::kQ6_K;
  v.n_dims = 2;
  v.ne = {cols, rows, 1, 1};
  v.data = bytes.data();
  CpuBackend be(1);
  const CpuKQuantKernels& kq = CpuKQuantKernelsFor(be.isa());
  const bool copies = kq.interleaved != nullptr && kq.interleaved(DType::kQ6_K);
  auto w = be.LoadWeight(v);
  REQUIRE(w.ok());
  INFO("isa " << CpuIsaName(be.isa()) << ", layout " << static_cast<int>(w->ref.layout));
  CHECK((w->storage != nullptr) == copies);
  CHECK((w->ref.data != bytes.data()) == copies);
  if (w->ref.layout == WeightLayout::kRows) {
    CHECK(std::memcmp(w->ref.data, bytes.data(), bytes.size()) == 0);
  }
  be.set_repack_weights(false);
  auto view = be.LoadWeight(v);
  REQUIRE(view.ok());
  CHECK(view->storage == nullptr);
  CHECK(view->ref.data == bytes.data());
}

TEST_CASE("cpu LoadWeight is zero-copy and rejects bad tensors", "[backend]") {
  CpuBackend be(1);
  std::vector<uint8_t> bytes = RandomWeight(DType::kQ8_0, 4, 64, 1);
  TensorView v;
  v.name = "w";
  v.type = DType::kQ8_0;
  v.n_dims = 2;
  v.ne = {64, 4, 1, 1};
  v.data = bytes.data();
  auto w = be.LoadWeight(v);
  REQUIRE(w.ok());
  CHECK(w->ref.data == bytes.data());
  CHECK(w->ref.rows == 4);
  CHECK(w->ref.cols == 64);
  CHECK(w->storage == nullptr);

  TensorView bad_cols = v;
  bad_cols.ne = {48, 4, 1, 1};  // not a whole number of Q8_0 blocks
  CHECK(be.LoadWeight(bad_cols).status().code() == absl::StatusCode::kInvalidArgument);
  TensorView three_d = v;
  three_d.ne = {64, 2, 2, 1};
  CHECK(be.LoadWeight(three_d).status().code() == absl::StatusCode::kInvalidArgument);
  TensorView bad_type = v;
  bad_type.type = static_cast<DType>(13);
  CHECK(be.LoadWeight(bad_type).status().code() == absl::StatusCode::kInvalidArgument);
  TensorView no_data = v;
  no_data.data = nullptr;
  CHECK(be.LoadWeight(no_data).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cpu Allocate returns aligned memory and fails cleanly when too large", "[backend]") {
  CpuBackend be(1);
  auto buf = be.Allocate(1000);
  REQUIRE(buf.ok());
  CHECK(reinterpret_cast<uintptr_t>((*buf)->data()) % 64 == 0);
  CHECK((*buf)->size() == 1000);
  CHECK(be.Allocate(SIZE_MAX / 2).status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(be.CopyToBackend(nullptr, (*buf)->data(), 4).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace odmoe::test
