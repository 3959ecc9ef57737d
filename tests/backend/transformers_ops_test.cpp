// The ops gpt-oss and DeepSeek-V2 add, on the CPU backend, against Hugging
// Face transformers' own modules (tests/data/ops/transformers_ops.json, made
// by scripts/fixtures/make_transformers_ops.py: YaRN RoPE as
// GptOssRotaryEmbedding / DeepseekV2RotaryEmbedding apply it, gpt-oss's
// eager attention with sinks and its sliding-window mask, and
// GptOssExperts._apply_gate). transformers computes in float32 (angles
// included), odmoe's angles in double, so the bounds below are float32
// rounding of transformers' side, stated per op.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace odmoe::test {
namespace {

using nlohmann::json;

json LoadFixture() {
  std::ifstream f(SourcePath("tests/data/ops/transformers_ops.json"));
  REQUIRE(f.good());
  return json::parse(f);
}

std::vector<float> Floats(const json& j) { return j.get<std::vector<float>>(); }

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

/// Runs Rope on the fixture's rows with the fixture's YaRN configuration.
std::vector<float> RunRope(const json& c) {
  RopeParams rope;
  rope.dims = c["dims"];
  rope.offset = c["offset"];
  rope.freq_base = c["freq_base"];
  rope.mode = c["mode"] == "half" ? RopeMode::kHalf : RopeMode::kInterleaved;
  rope.scaling.type = RopeScalingType::kYarn;
  rope.scaling.factor = c["factor"];
  rope.scaling.original_context = c["original_context"];
  rope.scaling.beta_fast = c["beta_fast"];
  rope.scaling.beta_slow = c["beta_slow"];
  rope.scaling.truncate = c["truncate"];
  // transformers' attention factor as the architecture table will derive it.
  rope.scaling.attention_factor = static_cast<float>(c["attention_factor"].get<double>());
  const std::vector<int32_t> pos = c["positions"].get<std::vector<int32_t>>();
  const int hd = c["head_dim"];
  const int64_t cols = c["heads"].get<int64_t>() * hd;
  std::vector<float> x = Floats(c["x"]);
  CpuBackend be(2);
  be.Rope(Mat{x.data(), static_cast<int64_t>(pos.size()), cols}, hd, pos.data(), rope);
  return x;
}

TEST_CASE("YaRN Rope equals transformers' gpt-oss rotary embedding", "[backend][transformers]") {
  const json c = LoadFixture()["rope_gpt_oss"];
  CHECK(c["attention_factor"].get<double>() == Approx(YarnAttentionFactor(c["factor"])));
  // transformers' angles are float32 products pos * inv_freq: at position
  // 4000 and inv_freq 1 up to 4000 * 2^-24 ~ 2.4e-4 rad, times |x| * 1.35
  // (observed: 6e-5); a wrong ramp, factor, truncation or mode is off by far
  // more.
  CHECK(MaxAbsDiff(RunRope(c), Floats(c["y"])) < 5e-4);
}

TEST_CASE("YaRN Rope at an offset equals transformers' DeepSeek-V2 rotary embedding on q_pe",
          "[backend][transformers]") {
  const json c = LoadFixture()["rope_deepseek"];
  // Positions up to 500: float32 angles within 500 * 2^-24 ~ 3e-5 rad
  // (observed: 2.4e-7).
  const std::vector<float> got = RunRope(c);
  CHECK(MaxAbsDiff(got, Floats(c["y"])) < 1e-4);
  // The q_nope part of each head is left as it was.
  const std::vector<float> x = Floats(c["x"]);
  const int hd = c["head_dim"], offset = c["offset"];
  for (size_t i = 0; i < x.size(); ++i) {
    if (static_cast<int>(i % hd) < offset) REQUIRE(got[i] == x[i]);
  }
}

TEST_CASE("Attention with sinks and a sliding window equals transformers' gpt-oss attention",
          "[backend][transformers]") {
  const json c = LoadFixture()["attention_gpt_oss"];
  const int n_head = c["n_head"], n_kv = c["n_head_kv"], hd = c["head_dim"];
  const std::vector<float> q = Floats(c["q"]), k = Floats(c["k"]), v = Floats(c["v"]);
  const std::vector<float> sinks = Floats(c["sinks"]);
  const int64_t n = static_cast<int64_t>(q.size()) / (n_head * hd);
  CpuBackend be(2);
  AttentionOptions options;
  options.sinks = sinks.data();
  options.window = c["window"];
  std::vector<float> out(q.size());
  // The whole sequence as one prefill, and again one row at a time.
  be.Attention(ConstMat(q.data(), n, n_head * hd), ConstMat(k.data(), n, n_kv * hd),
               ConstMat(v.data(), n, n_kv * hd), n_head, n_kv, hd, 0, c["scale"], options,
               Mat{out.data(), n, n_head * hd});
  CHECK(MaxAbsDiff(out, Floats(c["out"])) < 2e-6);
  options.window = 0;  // without the window the result must differ
  be.Attention(ConstMat(q.data(), n, n_head * hd), ConstMat(k.data(), n, n_kv * hd),
               ConstMat(v.data(), n, n_kv * hd), n_head, n_kv, hd, 0, c["scale"], options,
               Mat{out.data(), n, n_head * hd});
  CHECK(MaxAbsDiff(out, Floats(c["out"])) > 1e-2);
}

TEST_CASE("SwiGluOai equals transformers' GptOssExperts._apply_gate", "[backend][transformers]") {
  const json c = LoadFixture()["swiglu_oai"];
  const std::vector<float> gate = Floats(c["gate"]), up = Floats(c["up"]);
  std::vector<float> out(gate.size());
  CpuBackend be(1);
  const int64_t n = static_cast<int64_t>(gate.size());
  be.SwiGluOai(ConstMat(gate.data(), 1, n), ConstMat(up.data(), 1, n), c["alpha"], c["limit"],
               Mat{out.data(), 1, n});
  // Outputs up to 8 * 7 = 56; a few float32 ulp apart (exp and operation order).
  CHECK(MaxAbsDiff(out, Floats(c["out"])) < 2e-5);
}

}  // namespace
}  // namespace odmoe::test
