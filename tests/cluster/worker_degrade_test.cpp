// DAOP's graceful degradation (workers.degrade, LOSSY, off by default): a
// decode task the main node marks degradable (not its row's top-1 expert)
// whose expert is not loaded is computed with the expert the worker
// prefetched for its position, instead of loading its own; counted as a
// substitution (neither hit nor miss). Unmarked tasks load as always; through
// the cluster the tokens are those of a run with those substitutions, so the
// quality is measured (odmoe-bench), never assumed.
#include <catch2/catch.hpp>

#include "test_cluster.h"
#include "test_worker.h"

namespace odmoe::test {

TEST_CASE("worker: a degradable miss is computed with the expert prefetched for its position",
          "[cluster][worker][policy][tsan]") {
  TestWorker w([](WorkerCore::Options&) {});
  TestWorker exact([](WorkerCore::Options&) {});
  // Iteration 1 of layer 0 is predicted {3, 5}: position 0 (expert 3) is
  // prefetched into the worker's one slot.
  w.Hint(1, 0, {3, 5});
  w.WaitLoads(1);
  // The gate chose 6 there: degradable, so 3 computes in its place.
  const v1::ExpertResult r = w.Task(1, 0, 6, 0, /*degradable=*/true);
  REQUIRE(r.error_code() == 0);
  CHECK(r.substituted());
  CHECK(r.substitute() == 3);
  CHECK(!r.prefetched());
  CHECK(r.output().data() == exact.Task(1, 0, 3, 0).output().data());
  CHECK(r.output().data() != exact.Task(1, 0, 6, 0).output().data());
  // The slot freed, position 1's expert 5 is prefetched next (nothing was
  // loaded for 6), and substitutes for the gate's 7 there.
  w.WaitLoads(2);
  const v1::ExpertResult second = w.Task(1, 0, 7, 1, /*degradable=*/true);
  CHECK(second.substituted());
  CHECK(second.substitute() == 5);
  WorkerStats s = w.core->stats();
  CHECK(s.substitutions == 2);
  CHECK(s.misses == 0);
  CHECK(s.loads == 2);
  // With nothing prefetched for its position a degradable task has no
  // substitute: it loads its own expert.
  const v1::ExpertResult own = w.Task(1, 3, 7, 0, /*degradable=*/true);
  CHECK(!own.substituted());
  CHECK(own.output().data() == exact.Task(1, 3, 7, 0).output().data());
  // A task that is not degradable (a top-1 expert) never is substituted.
  w.Hint(2, 0, {1, 2});
  w.WaitLoads(4);
  const v1::ExpertResult top1 = w.Task(2, 0, 4, 0);
  CHECK(!top1.substituted());
  CHECK(top1.reloaded());
  CHECK(top1.output().data() == exact.Task(2, 0, 4, 0).output().data());
  s = w.core->stats();
  CHECK(s.substitutions == 2);
  CHECK(s.misses == 2);
}

TEST_CASE("cluster: degradation substitutes only where the prediction missed", "[cluster][policy]") {
  // Random predictions miss often: the workers substitute the lower experts
  // of those rows; the generation completes, and says how many.
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.prediction = PredictionMode::kRandom;
  cfg.degrade = true;
  absl::StatusOr<ClusterGenerateResult> r =
      GenerateOnNewCluster(cfg, TestRequest("Once upon a time", 24));
  REQUIRE(r.ok());
  CHECK(r->result.output_ids.size() == 24);
  CHECK(r->experts.substitutions > 0);
  // At most one of a row's two experts (never its top-1) per layer and token.
  const ModelConfig& c = TinyReference().model().config();
  CHECK(r->experts.substitutions <= static_cast<uint64_t>(23 * (c.n_layer - c.n_dense_leading)));
  // Off (the default), the same predictions substitute nothing and the
  // tokens are the single process's.
  cfg.degrade = false;
  absl::StatusOr<ClusterGenerateResult> p =
      GenerateOnNewCluster(cfg, TestRequest("Once upon a time", 24));
  REQUIRE(p.ok());
  CHECK(p->experts.substitutions == 0);
  CHECK(p->result.output_ids ==
        TinyReference().Generate(TestRequest("Once upon a time", 24)).value().output_ids);
}

}  // namespace odmoe::test
