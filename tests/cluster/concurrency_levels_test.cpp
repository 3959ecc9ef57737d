// Batch invariance through the cluster at 1, 2, 4 and 8 concurrent requests
// of mixed prompt lengths (greedy), with the shadow predicting every one:
// each request's tokens are the single process's whatever ran next to it,
// and at 4 and 8 one of them is cancelled mid-way without disturbing the
// others.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "test_cluster.h"

namespace odmoe::test {

TEST_CASE("concurrency: 1 2 4 and 8 requests at once with one cancelled each get their tokens",
          "[cluster][batching]") {
  const int n = GENERATE(1, 2, 4, 8);
  INFO(n << " requests at once");
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.max_running = 8;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  ReferenceEngine& engine = TinyReference();
  const std::vector<std::string> prompts = {
      "Once upon a time",
      "The sea",
      "A long time ago, in a small village by the river, there lived an old man who",
      "She said",
      "It is a truth universally acknowledged that a single man in possession of a good",
      "Hello",
      "The king and the queen",
      "Tom"};
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < n; ++i) reqs.push_back(TestRequest(prompts[static_cast<size_t>(i)], 20 + 3 * i));
  // With 4 or more, the last one's client hangs up after 5 tokens.
  const int victim = n >= 4 ? n - 1 : -1;
  std::atomic<int> victim_tokens{0};
  std::vector<absl::StatusOr<ClusterGenerateResult>> got(reqs.size(), absl::UnknownError(""));
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      if (i != victim) {
        got[static_cast<size_t>(i)] =
            (*cluster)->main().Generate(reqs[static_cast<size_t>(i)], nullptr);
        return;
      }
      got[static_cast<size_t>(i)] = (*cluster)->main().Generate(
          reqs[static_cast<size_t>(i)], [&](int32_t, std::string_view) { ++victim_tokens; },
          [&] { return victim_tokens.load() >= 5; });
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < n; ++i) {
    INFO("request " << i << ": " << reqs[static_cast<size_t>(i)].prompt);
    if (i == victim) {
      CHECK(absl::IsCancelled(got[static_cast<size_t>(i)].status()));
      continue;
    }
    REQUIRE(got[static_cast<size_t>(i)].ok());
    CHECK(got[static_cast<size_t>(i)]->result.output_ids ==
          engine.Generate(reqs[static_cast<size_t>(i)]).value().output_ids);
  }
  if (n > 1) CHECK((*cluster)->main().engine().shared_iterations() > 0);
  CHECK((*cluster)->main().engine().in_engine() == 0);
}

}  // namespace odmoe::test
