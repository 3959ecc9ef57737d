// Scaling worker groups while a generation runs: the schedule changes at token
// boundaries and the tokens stay exactly the single-process engine's.
#include <catch2/catch.hpp>

#include "cluster/main_client.h"
#include "engine/reference_engine.h"
#include "test_cluster.h"

namespace odmoe::test {

TEST_CASE("scaling: 8 -> 4 -> 6 -> 8 workers during one long generation",
          "[cluster][scaling][tsan]") {
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
      auto op = TestAuth((*cluster)->topology(), PeerRole::kOperator, "operator");
      auto reply = ScaleOnMain((*cluster)->main_address(), 6, op.get());
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
  auto op = TestAuth((*cluster)->topology(), PeerRole::kOperator, "operator");
  CHECK(absl::IsInvalidArgument(ScaleOnMain((*cluster)->main_address(), 5, op.get()).status()));
  CHECK(main.engine().active_workers() == 2);
}

TEST_CASE("scaling: whole groups of any size smaller or larger than top-k",
          "[cluster][scaling][tsan]") {
  GenerateRequest req;
  req.prompt = "It is a truth universally acknowledged, that a single man";
  req.max_tokens = 45;
  req.ignore_eos = true;
  auto engine = ReferenceEngine::Create(SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  const std::vector<int32_t> expected = engine->Generate(req).value().output_ids;
  // {workers, group size, scaled to, a size that is not whole groups}.
  const int cases[][4] = {{8, 4, 4, 6}, {3, 1, 1, 0}};
  for (const auto& [workers, group_size, down, bad] : cases) {
    INFO("workers " << workers << " in groups of " << group_size);
    ClusterConfig cfg;
    cfg.workers = workers;
    cfg.group_size = group_size;
    auto cluster = TestCluster::Start(cfg);
    REQUIRE(cluster.ok());
    MainNode& main = (*cluster)->main();
    std::vector<size_t> groups_seen;
    auto r = main.Generate(req, [&](int32_t, std::string_view) {
      groups_seen.push_back(main.engine().schedule().groups.size());
      if (groups_seen.size() == 15) REQUIRE(main.SetActiveWorkers(down).ok());
      if (groups_seen.size() == 30) REQUIRE(main.SetActiveWorkers(workers).ok());
    });
    REQUIRE(r.ok());
    CHECK(r->result.output_ids == expected);
    REQUIRE(groups_seen.size() == 45);
    CHECK(groups_seen[10] == static_cast<size_t>(workers / group_size));
    CHECK(groups_seen[25] == static_cast<size_t>(down / group_size));
    CHECK(groups_seen[40] == static_cast<size_t>(workers / group_size));
    CHECK(absl::IsInvalidArgument(main.SetActiveWorkers(bad)));
    CHECK(main.engine().active_workers() == workers);
  }
}

}  // namespace odmoe::test
