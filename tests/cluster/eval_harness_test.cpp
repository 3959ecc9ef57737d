// An evaluation harness against the ten-node testbed as real processes:
// lm-evaluation-harness's `local-completions` (tests/clients/eval_harness.py)
// scores a multiple-choice task through `echo` + `logprobs` and runs a
// generation task; every log-likelihood it computed from the cluster's
// answers must equal the single-process engine's for the same token ids.
// Development-time tools: where lm-eval or transformers is not installed
// (CI) the case passes with a warning.
#include <catch2/catch.hpp>
#include <fstream>

#include "engine/reference_engine.h"
#include "nlohmann/json.hpp"
#include "process_testbed.h"

namespace odmoe::test {
namespace {

TEST_CASE("clients: lm-evaluation-harness local-completions against the testbed",
          "[cluster][clients]") {
  const ShellResult probe = Sh("python3 -c 'import lm_eval, transformers' 2>&1");
  if (probe.exit_code != 0) {
    WARN("lm-eval / transformers not installed (pip install lm-eval transformers): "
         "harness case skipped");
    return;
  }
  const std::string model = SourcePath("models/tiny-mixtral-f16.gguf");
  const int http = FreePort();
  TestbedSpec spec;
  spec.main_extra = absl::StrCat("  http: 127.0.0.1:", http, "\n");
  ProcessTestbed bed(model, "odmoe_eval_harness", spec);
  const ShellResult up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::string out = bed.dir() / "eval";
  const ShellResult r =
      Sh(absl::StrCat("python3 ", SourcePath("tests/clients/eval_harness.py"), " http://127.0.0.1:",
                      http, "/v1 ", model, " ", out, " 2>&1 | tail -20"));
  INFO(r.output);
  REQUIRE(r.output.find("loglikelihood requests recorded") != std::string::npos);

  // Each recorded request: the harness's number from the cluster's echo
  // logprobs against the reference engine's teacher-forced scores.
  auto engine = ReferenceEngine::Create(model, {}).value();
  std::ifstream records(out + "/loglikelihood.jsonl");
  int n = 0, greedy = 0;
  for (std::string line; std::getline(records, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    std::vector<int32_t> ids = j["context"].get<std::vector<int32_t>>();
    const size_t ctx = ids.size();
    for (int32_t t : j["continuation"].get<std::vector<int32_t>>()) ids.push_back(t);
    REQUIRE(ctx >= 1);
    REQUIRE(ids.size() > ctx);
    const ScoreResult s = engine->Score(ids, {.first = 0, .top_n = 0}).value();
    double want = 0;
    bool want_greedy = true;
    for (size_t p = ctx; p < ids.size(); ++p) {
      want += s.next_logprobs[p - 1];
      want_greedy = want_greedy && s.top1[p - 1] == ids[p];
    }
    INFO("request " << n << ": " << ctx << " context + " << ids.size() - ctx
                    << " continuation tokens");
    CHECK(j["loglikelihood"].get<double>() == Approx(want).epsilon(1e-12).margin(1e-12));
    CHECK(j["is_greedy"].get<bool>() == want_greedy);
    greedy += want_greedy ? 1 : 0;
    ++n;
  }
  CHECK(n == 96);  // 24 documents x 4 choices
  const nlohmann::json results =
      nlohmann::json::parse(std::ifstream(out + "/results.json"));
  const double acc = results["heldout_mc"]["acc,none"].get<double>();
  CHECK(acc >= 0.0);
  CHECK(acc <= 1.0);
  WARN("lm-eval on the testbed: heldout_mc acc " << acc << ", " << greedy << " of " << n
                                                 << " continuations greedy");
}

}  // namespace
}  // namespace odmoe::test
