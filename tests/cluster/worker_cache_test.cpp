// The cache modes of a worker (workers.mode lru_cache | lfu_cache |
// utility_cache): experts stay after their task, and a miss evicts by the
// mode's rule: least recently used, least often used, or (MoE-SpAc) lowest
// utility, where the utility follows the hinted experts' frequencies and hot
// experts are admitted while the worker is idle. Through the cluster the
// tokens stay the single process's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>
#include <vector>

#include "test_cluster.h"
#include "test_worker.h"

namespace odmoe::test {
namespace {

using Cache = WorkerMode;

std::unique_ptr<TestWorker> CacheWorker(Cache cache, int experts) {
  return std::make_unique<TestWorker>([&](WorkerCore::Options& o) {
    o.mode = cache;
    o.cache_experts = experts;
    o.utility = {.window = 1, .levels = 4, .threshold = 1};
  });
}

bool Holds(const TestWorker& w, int layer, int expert) {
  const WorkerStats s = w.core->stats();
  return std::find(s.held_experts.begin(), s.held_experts.end(), std::make_pair(layer, expert)) !=
         s.held_experts.end();
}

}  // namespace

TEST_CASE("worker: lru and lfu caches evict by recency and by frequency",
          "[cluster][worker][policy]") {
  for (Cache cache : {Cache::kLruCache, Cache::kLfuCache}) {
    INFO((cache == Cache::kLruCache ? "lru" : "lfu"));
    auto w = CacheWorker(cache, 2);
    // Expert 1 twice, then 2: both held. Then 3: LRU evicts 1 (used longest
    // ago), LFU evicts 2 (used once).
    CHECK(!w->Task(1, 0, 1, 0).prefetched());
    CHECK(w->Task(2, 0, 1, 0).prefetched());  // held since the first: a hit
    CHECK(!w->Task(3, 0, 2, 0).prefetched());
    CHECK(!w->Task(4, 0, 3, 0).prefetched());
    CHECK(Holds(*w, 0, 3));
    CHECK(Holds(*w, 0, 1) == (cache == Cache::kLfuCache));
    CHECK(Holds(*w, 0, 2) == (cache == Cache::kLruCache));
    const WorkerStats s = w->core->stats();
    CHECK(s.hits == 1);
    CHECK(s.misses == 3);
    CHECK(s.peak_held == 2);
  }
}

TEST_CASE("worker: the utility cache evicts the lowest utility and admits hot experts when idle",
          "[cluster][worker][policy][tsan]") {
  auto w = CacheWorker(Cache::kUtilityCache, 2);
  // Iteration 1 of layer 0 is hinted {3, 5}: both rise to utility 1 (hot),
  // both are prefetched, both tasks hit.
  w->Hint(1, 0, {3, 5});
  w->WaitLoads(2);
  CHECK(w->Task(1, 0, 3, 0).prefetched());
  CHECK(w->Task(1, 0, 5, 1).prefetched());
  CHECK(w->core->utility(0, 3) == 1);
  // A prefill task of layer 1 misses: the cache is full of hot experts, so
  // the least recently used of them (3) makes room; idle again at once, the
  // worker admits hot expert 3 back in place of the cold one (layer 1 expert
  // 6, utility 0).
  CHECK(!w->Task(0, 1, 6, 0).prefetched());
  for (int i = 0; i < 400 && w->core->stats().admissions < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(w->core->stats().admissions == 1);
  CHECK(Holds(*w, 0, 3));
  CHECK(Holds(*w, 0, 5));
  CHECK(!Holds(*w, 1, 6));
  // A task of the next iteration finds it: a hit without a hint.
  CHECK(w->Task(2, 0, 3, 0).prefetched());
  // Iteration 3 is hinted {4, 6}: 3 and 5 fall to utility 0, 4 and 6 rise,
  // and both are prefetched in place of the cold ones.
  w->Hint(3, 0, {4, 6});
  w->WaitLoads(6);
  CHECK(w->core->utility(0, 3) == 0);
  CHECK(w->core->utility(0, 5) == 0);
  CHECK(w->core->utility(0, 4) == 1);
  CHECK(Holds(*w, 0, 4));
  CHECK(Holds(*w, 0, 6));
  CHECK(w->Task(3, 0, 6, 1).prefetched());
  CHECK(w->core->stats().misses == 0);  // (the prefill task is not counted)
}

TEST_CASE("cluster: the cache modes keep every token the single process's", "[cluster][policy]") {
  // The utility cache is fed by the shadow's predictions, by the gate
  // look-ahead's, and (speculative decoding) by the drafted iterations'.
  for (const auto& [mode, prediction, drafts] :
       std::vector<std::tuple<WorkerMode, PredictionMode, int>>{
           {WorkerMode::kLfuCache, PredictionMode::kNone, 0},
           {WorkerMode::kUtilityCache, PredictionMode::kShadow, 0},
           {WorkerMode::kUtilityCache, PredictionMode::kShadow, 3},
           {WorkerMode::kUtilityCache, PredictionMode::kLookahead, 0}}) {
    ClusterConfig cfg;
    cfg.workers = 4;
    cfg.worker_mode = mode;
    cfg.prediction = prediction;
    cfg.draft_tokens = drafts;
    cfg.cache_experts = 3;
    cfg.load_bandwidth = 50'000'000;
    auto cluster = TestCluster::Start(cfg);
    REQUIRE(cluster.ok());
    ReferenceEngine& engine = TinyReference();
    for (const GenerateRequest& req : PolicyRequests()) {
      INFO(WorkerModeName(mode) << " " << PredictionModeName(prediction) << " drafts " << drafts
                                << ": " << req.prompt);
      absl::StatusOr<ClusterGenerateResult> r = (*cluster)->main().Generate(req, nullptr);
      REQUIRE(r.ok());
      // (With drafts a sampled request follows the rejection rule: only a
      // greedy one has the single process's tokens.)
      if (drafts == 0 || req.sampling.temperature == 0) {
        CHECK(r->result.output_ids == engine.Generate(req).value().output_ids);
      }
      CHECK(r->experts.hits > 0);  // experts stayed, or were prefetched
    }
  }
}

}  // namespace odmoe::test
