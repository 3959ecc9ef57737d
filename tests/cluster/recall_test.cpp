// Prediction recall (paper Eq. 3) measured through the whole cluster: a Q8_0
// shadow aligned every iteration predicts almost every expert; without
// alignment it drifts; random prediction sits near k / E. Also exercises the
// Generate RPC end to end with the gRPC client.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "cluster/main_client.h"
#include "engine/reference_engine.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

double MeasureRecall(ClusterConfig cfg, int prompts, int tokens) {
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  uint64_t correct = 0, slots = 0;
  for (const std::string& p : HeldOutPrompts(prompts)) {
    GenerateRequest req;
    req.prompt = p;
    req.max_tokens = tokens;
    req.ignore_eos = true;
    auto r = (*cluster)->main().Generate(req, nullptr);
    REQUIRE(r.ok());
    correct += r->recall.correct;
    slots += r->recall.slots;
  }
  return slots ? static_cast<double>(correct) / slots : 0.0;
}

}  // namespace

TEST_CASE("recall: aligned Q8_0 shadow vs unaligned vs random", "[cluster]") {
  const int prompts = 8, tokens = 128;
  ClusterConfig aligned;
  ClusterConfig unaligned;
  unaligned.token_period = unaligned.kv_period = 0;
  ClusterConfig random;
  random.prediction = PredictionMode::kRandom;
  const double r_aligned = MeasureRecall(aligned, prompts, tokens);
  const double r_unaligned = MeasureRecall(unaligned, prompts, tokens);
  const double r_random = MeasureRecall(random, prompts, tokens);
  std::printf("recall over %d prompts x %d tokens: q8_0 aligned %.4f, unaligned %.4f, random %.4f\n",
              prompts, tokens, r_aligned, r_unaligned, r_random);
  CHECK(r_aligned >= 0.97);
  CHECK(r_unaligned < r_aligned - 0.02);
  CHECK(r_random == Approx(2.0 / 8.0).margin(0.05));
}

TEST_CASE("recall: the gate look-ahead predicts every MoE layer but the first on its own",
          "[cluster]") {
  ClusterConfig cfg;
  cfg.prediction = PredictionMode::kLookahead;  // no shadow node
  auto cluster = TestCluster::Start(cfg).value();
  CHECK(cluster->shadow() == nullptr);
  const int tokens = 32;
  double correct = 0, slots = 0;
  for (const std::string& prompt : HeldOutPrompts(4)) {
    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = tokens;
    req.ignore_eos = true;
    absl::StatusOr<ClusterGenerateResult> r = cluster->main().Generate(req, nullptr);
    REQUIRE(r.ok());
    CHECK(r->prediction == PredictionMode::kLookahead);
    // Decode iterations 1..31 of 8 MoE layers: layer 0 unpredicted, 1..7 predicted.
    CHECK(r->recall.predictions_missing == tokens - 1);
    CHECK(r->recall.slots == static_cast<uint64_t>((tokens - 1) * 7 * 2));
    CHECK(r->experts.hits > 0);
    correct += static_cast<double>(r->recall.correct);
    slots += static_cast<double>(r->recall.slots);
  }
  const double recall = correct / slots;
  std::printf("gate look-ahead recall over 4 prompts x %d tokens: %.4f\n", tokens, recall);
  CHECK(recall > 0.5);  // random guessing: 2 of 8 = 0.25
}

TEST_CASE("generate RPC: streamed tokens and statistics", "[cluster][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  v1::GenerateRequest req;
  req.set_prompt("The sea");
  req.set_max_tokens(12);
  req.set_ignore_eos(true);
  std::string text;
  int tokens = 0;
  auto stats = GenerateOnMain((*cluster)->main_address(), req, [&](int32_t id, std::string_view t) {
    text += t;
    tokens += id >= 0 ? 1 : 0;
  });
  REQUIRE(stats.ok());
  CHECK(tokens == 12);
  CHECK(stats->generated_tokens() == 12);
  CHECK(stats->output_ids_size() == 12);
  CHECK(stats->recall_per_token_size() == 11);
  CHECK(stats->prediction() == "shadow");
  CHECK(stats->expert_hits() + stats->expert_misses() == 11 * 8 * 2);

  auto engine = ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  GenerateRequest ref;
  ref.prompt = "The sea";
  ref.max_tokens = 12;
  ref.ignore_eos = true;
  auto expected = engine->Generate(ref).value();
  CHECK(text == expected.text);

  v1::GenerateRequest bad;
  bad.set_prompt("x");
  bad.set_max_tokens(0);
  auto refused = GenerateOnMain((*cluster)->main_address(), bad, nullptr);
  CHECK(absl::IsInvalidArgument(refused.status()));
  bad.set_max_tokens(100000);
  CHECK(absl::IsOutOfRange(GenerateOnMain((*cluster)->main_address(), bad, nullptr).status()));
  bad.set_max_tokens(4);
  bad.set_temperature(-1);
  CHECK(absl::IsInvalidArgument(GenerateOnMain((*cluster)->main_address(), bad, nullptr).status()));
}

}  // namespace odmoe::test
