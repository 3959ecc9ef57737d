// Speculative decoding with the shadow as drafter (shadow.draft_tokens): the
// main node verifies the shadow's drafted tokens in iterations of several
// rows through the cluster. Greedy output stays the single-process engine's
// for every prediction mode and alignment period; sampled output keeps its
// distribution (tests/engine/sampler_test.cpp); drafts that the
// main node rejects roll its KV back (the next iteration overwrites them).
#include <catch2/catch.hpp>
#include <tuple>

#include "test_cluster.h"

namespace odmoe::test {

TEST_CASE("speculative: greedy tokens are the single-process engine's in every prediction mode",
          "[cluster][speculative]") {
  // (prediction, token_period, kv_period)
  const auto [mode, token_period, kv_period] = GENERATE(
      std::make_tuple(PredictionMode::kShadow, 1, 1),
      std::make_tuple(PredictionMode::kShadow, 0, 0),
      std::make_tuple(PredictionMode::kShadow, 4, 4),
      std::make_tuple(PredictionMode::kShadow, 1, 0), std::make_tuple(PredictionMode::kNone, 1, 1),
      std::make_tuple(PredictionMode::kLookahead, 1, 1),
      std::make_tuple(PredictionMode::kRandom, 1, 1));
  INFO("prediction " << PredictionModeName(mode) << ", alignment " << token_period << "/"
                     << kv_period);
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = mode;
  cfg.shadow = true;
  cfg.draft_tokens = 4;
  cfg.draft_wait_us = 2'000'000;  // every iteration verifies all it can: deterministic counts
  cfg.token_period = token_period;
  cfg.kv_period = kv_period;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  uint64_t drafted = 0, accepted = 0, iterations = 0, tokens = 0;
  for (const std::string& prompt : HeldOutPrompts(3)) {
    const GenerateRequest req = TestRequest(prompt, 40);
    absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == TinyReference().Generate(req).value().output_ids);
    CHECK(r->prediction == mode);
    CHECK(r->speculation.draft_tokens == 4);
    drafted += r->speculation.drafted;
    accepted += r->speculation.accepted;
    iterations += r->speculation.iterations;
    tokens += r->speculation.tokens;
    CHECK(r->speculation.tokens == r->result.output_ids.size() - 1);  // the first is prefill's
  }
  // Without token alignment the shadow never learns the main node's tokens:
  // once they part, its drafts follow its own text and none is verified.
  if (token_period != 1) return;
  // The Q8_0 shadow, told every token, agrees with the model on almost all.
  CHECK(drafted > 0);
  CHECK(static_cast<double>(accepted) / static_cast<double>(drafted) > 0.5);
  CHECK(static_cast<double>(tokens) / static_cast<double>(iterations) > 2.0);
}

TEST_CASE("speculative: without waiting, whatever drafts are ready are verified, output unchanged",
          "[cluster][speculative][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.draft_tokens = 3;
  cfg.wire_delay_us = 200;  // the main node's iterations are slower than the shadow's tokens
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const GenerateRequest req = TestRequest("Once upon a time", 48);
  absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
  REQUIRE(r.ok());
  CHECK(r->result.output_ids == TinyReference().Generate(req).value().output_ids);
  CHECK(r->speculation.tokens == r->result.output_ids.size() - 1);
  CHECK(r->speculation.accepted <= r->speculation.drafted);
}

TEST_CASE("speculative: sampled requests and a batch of concurrent ones run through it",
          "[cluster][speculative]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.draft_tokens = 4;
  cfg.draft_wait_us = 2'000'000;
  cfg.max_running = 3;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  // Sampling verifies drafts by the rejection rule: same distribution, but
  // not the same random draws as without drafts, so only its shape is
  // checked here (the distribution: tests/engine/sampler_test.cpp).
  const GenerateRequest sampled = TestRequest("The sea is", 32, 0.8f, 3);
  absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(sampled, nullptr);
  REQUIRE(r.ok());
  CHECK(r->result.output_ids.size() == 32);
  CHECK(r->speculation.drafted > 0);
  CHECK(r->speculation.tokens == 31);
  // Concurrent requests verify their drafts in shared iterations.
  std::vector<GenerateRequest> reqs = {TestRequest("Hello there", 24),
                                       TestRequest("The king said", 30),
                                       TestRequest("In the morning", 20)};
  const std::vector<absl::StatusOr<ClusterGenerateResult>> got =
      GenerateConcurrently((*cluster)->main(), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == TinyReference().Generate(reqs[i]).value().output_ids);
  }
}

TEST_CASE("speculative: a rejected draft's KV row is overwritten (drafts from a wrong model)",
          "[cluster][speculative]") {
  // A q4_0 shadow disagrees more often: more rejections, so more rolled-back
  // rows; the output must not notice.
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.draft_tokens = 6;
  cfg.draft_wait_us = 2'000'000;
  cfg.quantization = DType::kQ4_0;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  uint64_t rejected = 0;
  for (const std::string& prompt : HeldOutPrompts(4)) {
    const GenerateRequest req = TestRequest(prompt, 48);
    absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == TinyReference().Generate(req).value().output_ids);
    rejected += r->speculation.drafted - r->speculation.accepted;
  }
  CHECK(rejected > 0);  // some rows were rolled back
}

TEST_CASE("speculative: the main node refuses draft settings it cannot run", "[cluster]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  Experiment e;
  e.draft_tokens = 2;
  absl::StatusOr<ClusterGenerateResult> r =
      (*cluster)->main().Generate(TestRequest("Hi", 4), nullptr, {}, "grpc", e);
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("shadow") != std::string::npos);
  e.draft_tokens = 99;
  r = (*cluster)->main().Generate(TestRequest("Hi", 4), nullptr, {}, "grpc", e);
  REQUIRE(!r.ok());
  CHECK(r.status().message().find("draft_tokens") != std::string::npos);
}

}  // namespace odmoe::test
