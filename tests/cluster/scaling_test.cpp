// Scaling worker groups while a generation runs: the schedule changes at token
// boundaries and the tokens stay exactly the single-process engine's.
#include <catch2/catch.hpp>

#include "cluster/main_client.h"
#include "engine/reference_engine.h"
#include "test_cluster.h"

namespace odmoe::test {

TEST_CASE("scaling: 8 -> 4 -> 6 -> 8 workers during one long generation", "[cluster][scaling]") {
  ClusterConfig cfg;
  cfg.workers = 8;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  MainNode& main = (*cluster)->main();
  const std::string prompt = "It is a truth universally acknowledged, that a single man";
  GenerateRequest req;
  req.prompt = prompt;
  req.max_tokens = 120;
  req.ignore_eos = true;
  auto engine = ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  const std::vector<int32_t> expected = engine->Generate(req).value().output_ids;

  std::vector<size_t> groups_seen;
  int token = 0;
  auto r = main.Generate(req, [&](int32_t, std::string_view) {
    ++token;
    groups_seen.push_back(main.engine().schedule().groups.size());
    if (token == 30) REQUIRE(main.SetActiveWorkers(4).ok());
    if (token == 60) {
      // Through the admin RPC, as odmoe-cluster scale does.
      auto reply = ScaleOnMain((*cluster)->main_address(), 6);
      REQUIRE(reply.ok());
    }
    if (token == 90) REQUIRE(main.SetActiveWorkers(8).ok());
  });
  REQUIRE(r.ok());
  CHECK(r->result.output_ids == expected);
  REQUIRE(groups_seen.size() == 120);
  CHECK(groups_seen[20] == 4);
  CHECK(groups_seen[50] == 2);
  CHECK(groups_seen[80] == 3);
  CHECK(groups_seen[110] == 4);
  CHECK(r->live_groups == 4);
  CHECK(r->schedule_version >= 3);

  // Workers that left took no tasks while out: scale down and count.
  REQUIRE(main.SetActiveWorkers(2).ok());
  const uint64_t before = (*cluster)->worker(7).core().stats().tasks;
  req.max_tokens = 20;
  auto small = main.Generate(req, nullptr);
  REQUIRE(small.ok());
  CHECK(small->result.output_ids ==
        std::vector<int32_t>(expected.begin(), expected.begin() + 20));
  CHECK((*cluster)->worker(7).core().stats().tasks == before);
  CHECK(small->live_groups == 1);

  // Bad sizes are refused and change nothing.
  CHECK(absl::IsInvalidArgument(main.SetActiveWorkers(3)));
  CHECK(absl::IsInvalidArgument(main.SetActiveWorkers(0)));
  CHECK(absl::IsInvalidArgument(main.SetActiveWorkers(10)));
  CHECK(absl::IsInvalidArgument(ScaleOnMain((*cluster)->main_address(), 5).status()));
  CHECK(main.engine().active_workers() == 2);
}

}  // namespace odmoe::test
