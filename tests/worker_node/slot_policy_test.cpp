// The slot policies' decisions without a backend (worker_node/slot_policy.h):
// each built-in mode's sizing, victim, prefetch and admission on hand-made
// slot states, the registry that makes them, and the worker-mode table the
// topology and the status read (topology/worker_mode.h).
#include "worker_node/slot_policy.h"

#include <catch2/catch.hpp>
#include <vector>

#include "model/model_config.h"
#include "topology/worker_mode.h"
#include "worker_node/lfu_policy.h"
#include "worker_node/lru_policy.h"
#include "worker_node/on_demand_policy.h"
#include "worker_node/resident_policy.h"
#include "worker_node/utility_policy.h"

namespace odmoe {
namespace {

SlotView Held(int layer, int expert, uint64_t last_used = 0) {
  SlotView v;
  v.loaded = true;
  v.layer = layer;
  v.expert = expert;
  v.last_used = last_used;
  return v;
}

SlotView Prefetch(int layer, int expert, StepKey key, uint32_t position) {
  SlotView v = Held(layer, expert);
  v.prefetched = true;
  v.planned = PlanRef{key, position};
  return v;
}

ModelConfig Config(int n_layer = 4, int n_expert = 8, int k = 2) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_expert = n_expert;
  c.n_expert_used = k;
  return c;
}

}  // namespace

TEST_CASE("slot policy: the state's free and loaded slots", "[worker][policy]") {
  const std::vector<SlotView> slots{Held(0, 3), SlotView{}, Held(1, 3)};
  const StepPlans plans;
  const SlotState s{slots, plans};
  CHECK(s.FreeSlot() == 1);
  CHECK(s.FindLoaded(1, 3) == 2);
  CHECK(s.FindLoaded(1, 4) == -1);
  const std::vector<SlotView> full{Held(0, 3)};
  CHECK(SlotState{full, plans}.FreeSlot() == -1);
}

TEST_CASE("slot policy: on_demand sizes by k > G, prefetches the plan, evicts the latest prefetch",
          "[worker][policy]") {
  OnDemandPolicy one(/*several=*/false), two(/*several=*/true);
  CHECK(one.SlotsNeeded() == 1);
  CHECK(one.AutoSlots() == 1);
  CHECK(two.AutoSlots() == 2);
  CHECK(one.SlotsInBudget(5) == 5);
  CHECK(one.SlotsInBudget(500) == 64);
  CHECK(one.Prefetches());

  // A later step's prefetch goes before an earlier one's; a load with no
  // plan (a queued task's) goes last; a pinned slot never.
  StepPlans plans;
  std::vector<SlotView> slots{Held(0, 1), Prefetch(0, 2, {1, 2, 0}, 0),
                              Prefetch(0, 3, {1, 3, 0}, 0), Held(0, 4)};
  slots[3].pinned = true;
  CHECK(one.Victim(SlotState{slots, plans}) == 2);
  slots[2].planned = PlanRef{{1, 1, 0}, 1};
  CHECK(one.Victim(SlotState{slots, plans}) == 1);
  const std::vector<SlotView> unplanned{Held(0, 1), Held(0, 2)};
  CHECK(one.Victim(SlotState{unplanned, plans}) == 0);
  std::vector<SlotView> pinned{Held(0, 1)};
  pinned[0].pinned = true;
  CHECK(one.Victim(SlotState{pinned, plans}) == -1);

  // Idle: the first planned expert not loaded, into a free slot.
  plans[{1, 5, 0}] = {{0, 1, false}, {1, 6, true}};
  plans[{1, 6, 0}] = {{0, 7, false}};
  const std::vector<SlotView> one_free{Held(0, 1), SlotView{}};
  std::optional<IdleLoad> next = one.NextLoad(SlotState{one_free, plans});
  REQUIRE(next.has_value());
  CHECK(next->slot == 1);
  CHECK(!next->evict);
  CHECK(next->layer == 0);
  CHECK(next->expert == 6);
  CHECK(next->low);
  REQUIRE(next->for_step.has_value());
  CHECK(next->for_step->key == StepKey{1, 5, 0});
  CHECK(next->for_step->position == 1);
  // No free slot: it waits (a prefetch never evicts).
  const std::vector<SlotView> no_free{Held(0, 1), Held(0, 2)};
  CHECK(!one.NextLoad(SlotState{no_free, plans}).has_value());
  // Everything planned is loaded: nothing to do.
  const std::vector<SlotView> all{Held(0, 1), Held(0, 6), Held(0, 7), SlotView{}};
  CHECK(!one.NextLoad(SlotState{all, plans}).has_value());
}

TEST_CASE("slot policy: resident preloads its set and spills into one more slot",
          "[worker][policy]") {
  const std::vector<std::pair<int, int>> set{{0, 0}, {0, 1}, {1, 0}};
  ResidentPolicy p(set);
  CHECK(p.Preload() == set);
  CHECK(p.SlotsNeeded() == 3);
  CHECK(p.AutoSlots() == 4);
  CHECK(p.SlotsInBudget(3) == 3);
  CHECK(p.SlotsInBudget(9) == 4);
  CHECK(!p.Prefetches());
  std::vector<SlotView> slots{Held(0, 0), Held(0, 1), Held(1, 0), Held(2, 5)};
  for (int i = 0; i < 3; ++i) slots[static_cast<size_t>(i)].pinned = true;
  const StepPlans plans;
  CHECK(p.Victim(SlotState{slots, plans}) == 3);
  slots.pop_back();
  CHECK(p.Victim(SlotState{slots, plans}) == -1);

  // The set is UsualExperts: every expert of its decode layers, and expert
  // e = worker index mod N_W of the others (worker 1 of 4, groups of 2).
  const ModelConfig c = Config(/*n_layer=*/2, /*n_expert=*/4, /*k=*/2);
  const WorkerPlacement placement{.worker_index = 1, .n_workers = 4, .group_size = 2};
  const std::vector<std::pair<int, int>> usual = UsualExperts(c, placement);
  CHECK(usual == std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 1}});
}

TEST_CASE("slot policy: lru evicts the least recently used and never prefetches",
          "[worker][policy]") {
  LruPolicy p(/*slots=*/3);
  CHECK(p.SlotsNeeded() == 3);
  CHECK(!p.Prefetches());
  std::vector<SlotView> slots{Held(0, 1, 7), Held(0, 2, 3), Held(0, 3, 9)};
  const StepPlans plans;
  CHECK(p.Victim(SlotState{slots, plans}) == 1);
  slots[1].pinned = true;
  CHECK(p.Victim(SlotState{slots, plans}) == 0);
  CHECK(!p.NextLoad(SlotState{slots, plans}).has_value());
}

TEST_CASE("slot policy: lfu counts the tasks it is told of and evicts the least often used",
          "[worker][policy]") {
  LfuPolicy p(/*slots=*/2, /*n_layer=*/2, /*n_expert=*/4);
  CHECK(!p.Prefetches());
  p.OnTaskDone(0, 1);
  p.OnTaskDone(0, 1);
  p.OnTaskDone(0, 2);
  p.OnTaskDone(5, 1);   // outside the model: ignored, not a crash
  p.OnTaskDone(0, -1);  // likewise
  CHECK(p.uses(0, 1) == 2);
  CHECK(p.uses(0, 2) == 1);
  CHECK(p.uses(5, 1) == 0);
  const StepPlans plans;
  const std::vector<SlotView> slots{Held(0, 1, 1), Held(0, 2, 2)};
  CHECK(p.Victim(SlotState{slots, plans}) == 1);
  // Ties: the least recently used.
  p.OnTaskDone(0, 2);
  CHECK(p.Victim(SlotState{slots, plans}) == 0);
}

TEST_CASE("slot policy: the utility cache observes hints, prefetches, admits and evicts by utility",
          "[worker][policy]") {
  UtilityPolicy p(/*slots=*/2, /*n_layer=*/2, /*n_expert=*/8,
                  {.window = 1, .levels = 4, .threshold = 1});
  CHECK(p.SlotsNeeded() == 2);
  CHECK(p.Prefetches());
  // One iteration per cycle: hinted experts rise to utility 1 (hot).
  const std::vector<PlannedExpert> plan{{0, 3, false}, {1, 5, false}};
  p.OnHint({1, 1, 0}, plan);
  CHECK(p.utility(0, 3) == 1);
  CHECK(p.utility(0, 5) == 1);
  CHECK(p.utility(0, 4) == 0);

  StepPlans plans;
  plans[{1, 1, 0}] = plan;
  // A free slot: the plan first.
  const std::vector<SlotView> empty{SlotView{}, SlotView{}};
  std::optional<IdleLoad> next = p.NextLoad(SlotState{empty, plans});
  REQUIRE(next.has_value());
  CHECK(next->expert == 3);
  CHECK(next->for_step.has_value());
  // Full: the lowest utility that no step is planned on makes room.
  const std::vector<SlotView> cold{Held(1, 6, 1), Held(0, 3, 2)};
  next = p.NextLoad(SlotState{cold, plans});
  REQUIRE(next.has_value());
  CHECK(next->slot == 0);
  CHECK(next->evict);
  CHECK(next->expert == 5);
  // A slot planned for a pending step is never taken for another.
  std::vector<SlotView> planned{Prefetch(1, 6, {1, 1, 1}, 0), Held(0, 3, 2)};
  planned[1].planned = PlanRef{{1, 1, 0}, 0};
  CHECK(!p.NextLoad(SlotState{planned, plans}).has_value());
  // A miss evicts the lowest utility, a planned slot last.
  CHECK(p.Victim(SlotState{cold, plans}) == 0);
  CHECK(p.Victim(SlotState{planned, plans}) == 0);  // both planned: the utility decides
  const std::vector<SlotView> mixed{Prefetch(1, 6, {1, 1, 1}, 0), Held(0, 3, 2)};
  CHECK(p.Victim(SlotState{mixed, plans}) == 1);  // the hot one, as it is not planned

  // Nothing planned: a hot expert that is not loaded is admitted, into a
  // free slot or in place of a colder one, never an equal one.
  const StepPlans none;
  const std::vector<SlotView> one_free{Held(0, 3), SlotView{}};
  next = p.NextLoad(SlotState{one_free, none});
  REQUIRE(next.has_value());
  CHECK(next->expert == 5);
  CHECK(!next->for_step.has_value());
  CHECK(!next->evict);
  next = p.NextLoad(SlotState{cold, none});
  REQUIRE(next.has_value());
  CHECK(next->slot == 0);
  CHECK(next->evict);
  CHECK(next->expert == 5);
  const std::vector<SlotView> hot{Held(0, 3), Held(0, 5)};
  CHECK(!p.NextLoad(SlotState{hot, none}).has_value());
}

TEST_CASE("slot policy: the registry makes every mode of the table", "[worker][policy]") {
  const ModelConfig c = Config();
  const SlotPolicyContext context{.config = c,
                                  .placement = {.worker_index = 0, .n_workers = 2, .group_size = 2},
                                  .cache_experts = 3,
                                  .utility = {}};
  // The built-in rows come first (a test may have registered more).
  const std::vector<WorkerModeInfo> rows = WorkerModes();
  REQUIRE(rows.size() >= 5);
  for (const WorkerModeInfo& row : std::vector<WorkerModeInfo>(rows.begin(), rows.begin() + 5)) {
    INFO(row.name);
    absl::StatusOr<std::unique_ptr<SlotPolicy>> made =
        CreateSlotPolicy(FindWorkerMode(row.name).value(), context);
    REQUIRE(made.ok());
    CHECK((*made)->SlotsNeeded() >= 1);
    CHECK(((*made)->Prefetches() || row.hints != WorkerModeHints::kRequired));
    if (row.hints == WorkerModeHints::kIgnored) CHECK(!(*made)->Prefetches());
    if (row.keeps_experts) CHECK((*made)->SlotsNeeded() == 3);
  }
  SlotPolicyContext empty = context;
  empty.cache_experts = 0;
  for (WorkerMode m : {WorkerMode::kLruCache, WorkerMode::kLfuCache, WorkerMode::kUtilityCache}) {
    absl::StatusOr<std::unique_ptr<SlotPolicy>> made = CreateSlotPolicy(m, empty);
    REQUIRE(!made.ok());
    CHECK(made.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(made.status().message()).find("at least one expert") != std::string::npos);
  }
  // A row without a policy is refused when a worker is made, naming the fix.
  REQUIRE(RegisterWorkerMode({.name = "row_without_policy", .help = "no factory"}).ok());
  absl::StatusOr<std::unique_ptr<SlotPolicy>> orphan =
      CreateSlotPolicy(FindWorkerMode("row_without_policy").value(), context);
  REQUIRE(!orphan.ok());
  CHECK(orphan.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(orphan.status().message()).find("slot_policy_registry.cpp") !=
        std::string::npos);
  CHECK(!RegisterSlotPolicy({.name = "no_factory", .help = "none"}, nullptr).ok());
}

TEST_CASE("worker modes: one table of names, traits and wire numbers", "[worker][policy]") {
  CHECK(WorkerModeValues().starts_with(
      "on_demand | resident | lru_cache | lfu_cache | utility_cache"));
  CHECK(FindWorkerMode("lru_cache").value() == WorkerMode::kLruCache);
  CHECK(WorkerMode() == WorkerMode::kOnDemand);
  absl::StatusOr<WorkerMode> bad = FindWorkerMode("lru");
  REQUIRE(!bad.ok());
  CHECK(std::string(bad.status().message()).find("expected on_demand | resident") !=
        std::string::npos);
  // The built-in rows keep the proto's numbers.
  CHECK(WorkerMode::kOnDemand.info().wire == 1);
  CHECK(WorkerMode::kResident.info().wire == 2);
  CHECK(WorkerMode::kLruCache.info().wire == 3);
  CHECK(WorkerMode::kLfuCache.info().wire == 4);
  CHECK(WorkerMode::kUtilityCache.info().wire == 5);
  CHECK(IsCacheMode(WorkerMode::kUtilityCache));
  CHECK(!IsCacheMode(WorkerMode::kResident));
  // Registration: names are checked, taken once, and get the next wire number.
  CHECK(RegisterWorkerMode({.name = "Bad Name", .help = "x"}).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(RegisterWorkerMode({.name = "lru_cache", .help = "x"}).code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(RegisterWorkerMode({.name = "wire_taken", .help = "x", .wire = 3}).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE(RegisterWorkerMode({.name = "table_test_mode", .help = "x"}).ok());
  CHECK(FindWorkerMode("table_test_mode").value().info().wire > 5);
  // What predictions mean to a mode.
  CHECK(CheckWorkerModeHints(WorkerMode::kOnDemand, "none").ok());
  CHECK(CheckWorkerModeHints(WorkerMode::kOnDemand, "shadow").ok());
  CHECK(!CheckWorkerModeHints(WorkerMode::kLfuCache, "lookahead").ok());
  CHECK(CheckWorkerModeHints(WorkerMode::kLfuCache, "none").ok());
  CHECK(!CheckWorkerModeHints(WorkerMode::kUtilityCache, "none").ok());
  CHECK(CheckWorkerModeHints(WorkerMode::kUtilityCache, "random").ok());
}

}  // namespace odmoe
