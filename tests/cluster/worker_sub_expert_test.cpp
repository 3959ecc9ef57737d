// FIRM's sub-expert streaming (workers.sub_expert): an expert a task waits for
// (a miss, a prefill task) loads as three units, gate, up, down, and the
// compute runs each stage as its unit lands. Same bits as the whole expert;
// the task waits only for what its stages had to wait for; a prefetched
// expert is a hit as always. Through the cluster the tokens stay the single
// process's.
#include <catch2/catch.hpp>

#include "test_cluster.h"
#include "test_worker.h"

namespace odmoe::test {

TEST_CASE("worker: a miss streamed in sub-expert units gives the whole expert's bits",
          "[cluster][worker][policy][tsan]") {
  // 400 KB/s: a 96 KiB expert takes ~250 ms to load.
  constexpr uint64_t kLink = 400'000;
  auto whole = std::make_unique<TestWorker>([](WorkerCore::Options& o) { o.load_bandwidth = kLink; });
  auto streamed = std::make_unique<TestWorker>([](WorkerCore::Options& o) {
    o.load_bandwidth = kLink;
    o.sub_expert = true;
  });
  const double load = static_cast<double>(LargestPackedExpert(whole->model->config())) / kLink;
  for (const auto& [token, layer, expert] :
       {std::tuple<uint32_t, uint32_t, uint32_t>{1, 0, 3}, {0, 2, 5}}) {  // a decode miss, a prefill task
    INFO("token " << token << " layer " << layer << " expert " << expert);
    const v1::ExpertResult want = whole->Task(token, layer, expert, 0);
    const v1::ExpertResult got = streamed->Task(token, layer, expert, 0);
    REQUIRE(want.error_code() == 0);
    REQUIRE(got.error_code() == 0);
    CHECK(got.output().data() == want.output().data());  // bit for bit
    CHECK(!got.prefetched());
    // The whole load was paid for, and the task waited for (at most) it:
    // the units it waited for one by one.
    CHECK(got.load_seconds() >= load * 0.99);
    CHECK(got.stall_seconds() > 0);
    CHECK(got.stall_seconds() <= got.load_seconds());
    CHECK(got.compute_seconds() < got.load_seconds());
  }
  WorkerStats s = streamed->core->stats();
  CHECK(s.misses == 1);
  CHECK(s.loads == 2);
  // A prefetched expert is loaded whole ahead of its task: a hit, no stall
  // beyond what was left of its load.
  streamed->Hint(2, 1, {4, 6});
  streamed->WaitLoads(3);
  const v1::ExpertResult hit = streamed->Task(2, 1, 4, 0);
  CHECK(hit.prefetched());
  CHECK(hit.output().data() == whole->Task(2, 1, 4, 0).output().data());
}

TEST_CASE("cluster: sub-expert streaming keeps every token the single process's",
          "[cluster][policy]") {
  const PredictionMode mode = GENERATE(PredictionMode::kShadow, PredictionMode::kNone);
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = mode;
  cfg.load_bandwidth = 50'000'000;  // 2 ms an expert
  cfg.sub_expert = true;
  ExpectPolicyKeepsTokens(cfg, [&](const ClusterGenerateResult& r) {
    if (mode == PredictionMode::kNone) CHECK(r.experts.misses > 0);  // every one streamed
  });
}

}  // namespace odmoe::test
