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

TEST_CASE("recall: FIRM's meeting of layers and DAOP's late start give the model's tokens",
          "[cluster]") {
  ClusterConfig cfg;
  cfg.prediction = PredictionMode::kLookahead;
  auto cluster = TestCluster::Start(cfg).value();
  const int tokens = 24;
  const GenerateRequest req = TestRequest(HeldOutPrompts(1).front(), tokens);
  const std::vector<int32_t> want = TinyReference().Generate(req).value().output_ids;
  auto run = [&](const LookaheadSpec& spec) {
    Experiment e;
    e.lookahead = spec;
    absl::StatusOr<ClusterGenerateResult> r =
        cluster->main().Generate(req, nullptr, {}, "grpc", e);
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == want);
    return *r;
  };
  // Plain look-ahead: 8 MoE layers, layer 0 never predicted.
  const ClusterGenerateResult plain = run({1, 0, 0});
  CHECK(plain.recall.predictions_missing == tokens - 1);
  // DAOP: layers 1..3 load after their own gate, 4..7 are predicted.
  const ClusterGenerateResult daop = run({1, 0, 4});
  CHECK(daop.recall.predictions_missing == static_cast<uint64_t>((tokens - 1) * 4));
  CHECK(daop.recall.slots == static_cast<uint64_t>((tokens - 1) * 4 * 2));
  // By layer: nothing below layer 4, every iteration from it on.
  REQUIRE(daop.recall.layer_slots.size() == 8);
  for (int l = 0; l < 8; ++l) {
    CHECK(daop.recall.layer_slots[l] == (l < 4 ? 0u : static_cast<uint64_t>((tokens - 1) * 2)));
  }
  // FIRM: 3 layers each name 4 of the 8 experts; the prediction is what all
  // name, so a pair may go unpredicted (no common expert), and recall over
  // the predicted pairs is reported as usual.
  const ClusterGenerateResult mol = run({3, 4, 0});
  CHECK(mol.recall.predictions_missing >= static_cast<uint64_t>(tokens - 1));
  CHECK(mol.recall.slots > 0);
  CHECK(mol.recall.slots <= static_cast<uint64_t>((tokens - 1) * 7 * 2));
  // Two voters naming all 8 experts agree on all of them; at most k are
  // hinted, the latest voter's likeliest first: the plain look-ahead's.
  const ClusterGenerateResult all = run({2, 8, 0});
  CHECK(all.recall.correct == plain.recall.correct);
  CHECK(all.recall.slots == plain.recall.slots);
  std::printf("look-ahead recall: plain %.4f, DAOP from layer 4 %.4f, FIRM 3 x 4 %.4f (%llu pairs "
              "unpredicted)\n",
              plain.recall.overall, daop.recall.overall, mol.recall.overall,
              static_cast<unsigned long long>(mol.recall.predictions_missing));
  // Bad variants are refused before anything runs.
  Experiment bad;
  bad.lookahead = LookaheadSpec{0, 0, 0};
  CHECK(!cluster->main().Generate(req, nullptr, {}, "grpc", bad).ok());
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
