// Concurrent requests on one cluster (main.max_running): they are batched
// into shared iterations, and each one's tokens are exactly what the
// single-process engine gives for it alone, whatever ran next to it; a
// cancelled one ends without disturbing the others.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "test_cluster.h"

namespace odmoe::test {

TEST_CASE("concurrency: requests batched through the cluster get their single-process tokens",
          "[cluster][batching]") {
  const PredictionMode mode = GENERATE(PredictionMode::kShadow, PredictionMode::kLookahead);
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 4;
  cfg.prediction = mode;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  ReferenceEngine& engine = TinyReference();
  const std::vector<GenerateRequest> reqs = {
      TestRequest("Once upon a time", 40),
      TestRequest("The sea", 24, 0.8f, 11),
      TestRequest("A long time ago, in a small village by the river, there lived an old man who",
                  30),
      TestRequest("She said", 36, 1.0f, 5),
      TestRequest("Hello", 20),  // waits for a slot (max_running 4), then joins
      TestRequest("The king and the queen", 28),
  };
  const std::vector<absl::StatusOr<ClusterGenerateResult>> got =
      GenerateConcurrently((*cluster)->main(), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i << ": " << reqs[i].prompt);
    REQUIRE(got[i].ok());
    const GenerateResult alone = engine.Generate(reqs[i]).value();
    CHECK(got[i]->result.output_ids == alone.output_ids);
    CHECK(got[i]->result.text == alone.text);
  }
  const MainEngine& main_engine = (*cluster)->main().engine();
  CHECK(main_engine.shared_iterations() > 0);  // they did share iterations
  CHECK(main_engine.in_engine() == 0);
  // Alone again afterwards: prediction is back for a single request. (A
  // loaded machine under a sanitizer can finish 16 tokens before the shadow's
  // first prediction arrives: such a run is repeated, one of three must have
  // predicted slots.)
  const std::vector<int32_t> want = engine.Generate(TestRequest("Once", 16)).value().output_ids;
  const absl::StatusOr<ClusterGenerateResult> solo = GenerateUntilPredicted(
      [&] { return (*cluster)->main().Generate(TestRequest("Once", 16), nullptr); },
      [&](const ClusterGenerateResult& r) { CHECK(r.result.output_ids == want); });
  REQUIRE(solo.ok());
  CHECK(solo->recall.slots > 0);
}

TEST_CASE("concurrency: the shadow predicts every request of a shared iteration",
          "[cluster][batching]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 3;
  cfg.load_bandwidth = 400'000'000;  // loads take time: a prefetch shows as a hit
  // Every message takes 1 ms: an iteration of the main node (two messages per
  // layer) takes far longer than the shadow's forward of three rows, also on a
  // loaded machine, so its predictions are in before the layers need them.
  cfg.wire_delay_us = 1000;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  ReferenceEngine& engine = TinyReference();
  constexpr int kTokens = 32;
  // One request alone first: the shadow's slot of a request that ended must
  // be free for the three that follow at once (the shadow follows
  // main.max_running = 3 requests).
  absl::StatusOr<ClusterGenerateResult> solo =
      (*cluster)->main().Generate(TestRequest("Once upon a time", kTokens), nullptr);
  REQUIRE(solo.ok());
  REQUIRE(solo->recall.slots > 0);
  const std::vector<GenerateRequest> reqs = {TestRequest("Once upon a time", kTokens),
                                             TestRequest("The sea was calm", kTokens),
                                             TestRequest("She said that", kTokens)};
  const uint64_t shared_before = (*cluster)->main().engine().shared_iterations();
  const std::vector<absl::StatusOr<ClusterGenerateResult>> got =
      GenerateConcurrently((*cluster)->main(), reqs);
  CHECK((*cluster)->main().engine().shared_iterations() - shared_before >= kTokens / 2);
  uint64_t hits = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i << ": " << reqs[i].prompt);
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == engine.Generate(reqs[i]).value().output_ids);
    // Its iterations were predicted although most of them were shared (a
    // request the shadow did not follow has no predicted slot at all), and
    // the predictions are right.
    CHECK(got[i]->prediction == PredictionMode::kShadow);
    CHECK(got[i]->recall.slots > 0);
    CHECK(got[i]->recall.overall > 0.8);
    hits += got[i]->experts.hits;
  }
  // The workers prefetched from the shared iterations' union hints.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Under the sanitizers the shadow's forwards slow down more than the main
  // node's steps: its predictions come after the shared iterations that
  // needed them (recall is still counted above), so no prefetch is in time.
  // Whether the hints prefetch is the normal build's to check.
  WARN("sanitizer build: " << hits << " hits from the union hints (not checked)");
#else
  INFO(hits << " hits");
  CHECK(hits > 0);
#endif
}

TEST_CASE("concurrency: a request cancelled while batched leaves the others intact",
          "[cluster][batching][tsan]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 3;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  ReferenceEngine& engine = TinyReference();
  const GenerateRequest a = TestRequest("Once upon a time", 48), b = TestRequest("The sea", 40);
  const GenerateRequest victim = TestRequest("She said", 60);
  std::atomic<int> victim_tokens{0};
  absl::StatusOr<ClusterGenerateResult> ra = absl::UnknownError(""), rb = ra, rv = ra;
  std::thread ta([&] { ra = (*cluster)->main().Generate(a, nullptr); });
  std::thread tb([&] { rb = (*cluster)->main().Generate(b, nullptr); });
  std::thread tv([&] {
    rv = (*cluster)->main().Generate(
        victim, [&](int32_t, std::string_view) { ++victim_tokens; },
        [&] { return victim_tokens.load() >= 5; });
  });
  ta.join();
  tb.join();
  tv.join();
  INFO(rv.status());
  CHECK(absl::IsCancelled(rv.status()));
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(ra->result.output_ids == engine.Generate(a).value().output_ids);
  CHECK(rb->result.output_ids == engine.Generate(b).value().output_ids);
  CHECK((*cluster)->main().engine().in_engine() == 0);
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("concurrency: a worker killed during batched iterations costs no request its tokens",
          "[cluster][batching][failures]") {
  ClusterConfig cfg;
  cfg.workers = 6;
  cfg.max_running = 3;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  ReferenceEngine& engine = TinyReference();
  const std::vector<GenerateRequest> reqs = {
      TestRequest("Once upon a time", 40), TestRequest("The sea", 40),
      TestRequest("It is a truth universally acknowledged", 40)};
  std::atomic<int> first_tokens{0};
  std::vector<absl::StatusOr<ClusterGenerateResult>> got(reqs.size(), absl::UnknownError(""));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < reqs.size(); ++i) {
    clients.emplace_back([&, i] {
      got[i] = c.main().Generate(reqs[i], [&, i](int32_t, std::string_view) {
        // Request 0's 12th token: the others are running beside it by then.
        if (i == 0 && ++first_tokens == 12) c.KillWorker(4);
      });
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == engine.Generate(reqs[i]).value().output_ids);
  }
  CHECK(c.main().engine().shared_iterations() > 0);
  CHECK(c.main().engine().schedule().groups.size() == 2);  // the dead worker's group left
}

}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("concurrency: look-ahead and random hints predict shared iterations too",
          "[cluster][batching][tsan]") {
  const PredictionMode mode = GENERATE(PredictionMode::kLookahead, PredictionMode::kRandom);
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 3;
  cfg.prediction = mode;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  constexpr int kTokens = 24;
  std::vector<GenerateRequest> reqs;
  for (const std::string& prompt : HeldOutPrompts(3)) {
    reqs.push_back(TestRequest(prompt, kTokens));
    reqs.back().ignore_eos = true;
  }
  const uint64_t shared_before = (*cluster)->main().engine().shared_iterations();
  const std::vector<absl::StatusOr<ClusterGenerateResult>> got =
      GenerateConcurrently((*cluster)->main(), reqs);
  CHECK((*cluster)->main().engine().shared_iterations() - shared_before >= kTokens / 2);
  double correct = 0, slots = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i << ": " << reqs[i].prompt);
    REQUIRE(got[i].ok());
    CHECK(got[i]->result.output_ids == TinyReference().Generate(reqs[i]).value().output_ids);
    CHECK(got[i]->prediction == mode);
    // The main node's own predictors run in every decode iteration of
    // decode rows, shared or not (those beside a prompt chunk are
    // unpredicted): most of its 23 decode iterations x 8 MoE layers x top-2
    // slots are predicted (look-ahead: all layers but the first).
    const uint64_t most = static_cast<uint64_t>((kTokens - 1) * 8 * 2);
    CHECK(got[i]->recall.slots > most / 2);
    correct += static_cast<double>(got[i]->recall.correct);
    slots += static_cast<double>(got[i]->recall.slots);
  }
  // The look-ahead's predictions are good, random ones are guesses (2 of 8).
  if (mode == PredictionMode::kLookahead) CHECK(correct / slots > 0.5);
  if (mode == PredictionMode::kRandom) CHECK(correct / slots < 0.5);
}

TEST_CASE("concurrency: requests decoding together verify the shadow's drafts in one iteration",
          "[cluster][batching][speculative]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 3;
  cfg.draft_tokens = 4;
  // Every message takes 1 ms: the shadow, one forward for the three requests,
  // runs ahead of the main node and has drafts ready (also on a loaded machine).
  cfg.wire_delay_us = 1000;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  constexpr int kTokens = 32;
  std::vector<GenerateRequest> reqs = {TestRequest("Once upon a time", kTokens),
                                       TestRequest("The sea was calm", kTokens, 0.8f, 7),
                                       TestRequest("She said that", kTokens)};
  for (GenerateRequest& r : reqs) r.ignore_eos = true;
  const uint64_t shared_before = (*cluster)->main().engine().shared_iterations();
  const uint64_t shared_drafts_before = (*cluster)->main().engine().shared_drafts();
  const std::vector<absl::StatusOr<ClusterGenerateResult>> got =
      GenerateConcurrently((*cluster)->main(), reqs);
  const uint64_t shared = (*cluster)->main().engine().shared_iterations() - shared_before;
  const uint64_t shared_drafts =
      (*cluster)->main().engine().shared_drafts() - shared_drafts_before;
  uint64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i << ": " << reqs[i].prompt);
    REQUIRE(got[i].ok());
    if (reqs[i].sampling.temperature == 0) {
      CHECK(got[i]->result.output_ids == TinyReference().Generate(reqs[i]).value().output_ids);
    } else {
      // Sampling verifies drafts by the rejection rule: the same distribution,
      // not the same draws (speculative_test.cpp).
      CHECK(got[i]->result.output_ids.size() == static_cast<size_t>(kTokens));
    }
    CHECK(got[i]->speculation.draft_tokens == 4);
    // Every decode iteration, shared or not, counts its tokens.
    CHECK(got[i]->speculation.tokens == got[i]->result.output_ids.size() - 1);
    CHECK(got[i]->speculation.accepted <= got[i]->speculation.drafted);
    drafted += got[i]->speculation.drafted;
    accepted += got[i]->speculation.accepted;
  }
  INFO(shared << " shared iterations verified " << shared_drafts << " drafts; " << accepted
              << " of " << drafted << " drafts accepted");
  CHECK(shared > 0);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Under the sanitizers the shadow's forwards slow down more than the main
  // node's steps: it may never be ahead, and then there is nothing to verify.
  WARN("sanitizer build: " << drafted << " drafts verified (not checked)");
#else
  // Drafts rode in the shared iterations, and some were right (a shadow of
  // the same model, quantized).
  CHECK(shared_drafts > 0);
  CHECK(drafted > 0);
  CHECK(accepted > 0);
#endif
}

}  // namespace odmoe::test
