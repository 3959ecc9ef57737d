// A new worker policy needs its class and one registration, nothing else:
// this file defines a cache that evicts the most recently used expert
// (slot_policy.h's example), registers it through the public registry
// (RegisterSlotPolicy), and uses it as a topology would (workers.mode:
// mru_cache), as a worker does (WorkerCore), and as the status does (its
// wire number's name). The product files that knew no such mode are
// untouched: a built-in one is the same class in worker_node/<name>_policy.h,
// its row in topology/worker_mode.cpp and its factory in
// worker_node/slot_policy_registry.cpp.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "cluster/node_stats.h"
#include "cluster/test_worker.h"
#include "test_paths.h"
#include "topology/topology.h"
#include "worker_node/slot_policy.h"

namespace odmoe {
namespace {

// A cache evicting the most recently used expert (the worst choice for a
// decode loop, which is what makes it visible).
class MruPolicy : public SlotPolicy {
 public:
  explicit MruPolicy(int slots) : slots_(slots) {}
  int SlotsNeeded() const override { return slots_; }
  // (slot_policy.h's example, as it is written there.)
  int Victim(const SlotState& s) const override {
    return LowestScore(s, [&](int l, int e) {
      return ~s.slots[s.FindLoaded(l, e)].last_used;  // the latest use scores lowest
    });
  }

 private:
  int slots_;
};

WorkerMode Mru() {
  static const absl::Status registered = RegisterSlotPolicy(
      {.name = "mru_cache",
       .help = "evicts the most recently used",
       .hints = WorkerModeHints::kIgnored,
       .keeps_experts = true},
      [](const SlotPolicyContext& c) -> absl::StatusOr<std::unique_ptr<SlotPolicy>> {
        return std::make_unique<MruPolicy>(c.cache_experts);
      });
  REQUIRE(registered.ok());
  return FindWorkerMode("mru_cache").value();
}

std::string Yaml(const std::string& prediction, const std::string& mode) {
  return "model: " + test::SourcePath("models/tiny-mixtral-f16.gguf") +
         "\nprediction: " + prediction +
         "\nmain: { id: main, address: 127.0.0.1:7700 }\nworkers:\n  mode: " + mode +
         "\n  cache_experts: 2\n  nodes:\n    - { id: w0, address: 127.0.0.1:7710 }\n"
         "    - { id: w1, address: 127.0.0.1:7711 }\n";
}

}  // namespace

TEST_CASE("slot policy: a policy defined in a test is a workers.mode once registered",
          "[worker][policy]") {
  const WorkerMode mru = Mru();
  CHECK(WorkerModeValues().find("mru_cache") != std::string::npos);
  // The topology takes it, with the traits its row declares, and writes it back.
  absl::StatusOr<Topology> t = ParseTopology(Yaml("none", "mru_cache"), "t.yaml");
  REQUIRE(t.ok());
  CHECK(t->worker_mode == mru);
  CHECK(IsCacheMode(t->worker_mode));
  absl::StatusOr<Topology> back = ParseTopology(TopologyToYaml(*t), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->worker_mode == mru);
  CHECK(back->cache_experts == 2);
  absl::StatusOr<Topology> predicted = ParseTopology(Yaml("random", "mru_cache"), "t.yaml");
  REQUIRE(!predicted.ok());
  CHECK(std::string(predicted.status().message()).find("mru_cache") != std::string::npos);
  // An unknown mode's error lists the registered ones.
  absl::StatusOr<Topology> typo = ParseTopology(Yaml("none", "mru"), "t.yaml");
  REQUIRE(!typo.ok());
  CHECK(std::string(typo.status().message()).find("mru_cache") != std::string::npos);
  // The status names it by its wire number.
  CHECK(WorkerMemoryModeName(static_cast<v1::WorkerMemoryMode>(mru.info().wire)) == "mru_cache");
}

TEST_CASE("slot policy: a worker runs a policy defined in a test", "[worker][policy]") {
  const WorkerMode mru = Mru();
  test::TestWorker w([&](WorkerCore::Options& o) {
    o.mode = mru;
    o.cache_experts = 2;
  });
  auto holds = [&](int layer, int expert) {
    const WorkerStats s = w.core->stats();
    return std::find(s.held_experts.begin(), s.held_experts.end(), std::make_pair(layer, expert)) !=
           s.held_experts.end();
  };
  CHECK(!w.Task(1, 0, 1, 0).prefetched());
  CHECK(!w.Task(2, 0, 2, 0).prefetched());
  CHECK(w.Task(3, 0, 1, 0).prefetched());  // kept (a cache): a hit
  // 3 evicts the most recently used: 1 (the LRU cache would evict 2).
  CHECK(!w.Task(4, 0, 3, 0).prefetched());
  CHECK(holds(0, 2));
  CHECK(holds(0, 3));
  CHECK(!holds(0, 1));
  const WorkerStats s = w.core->stats();
  CHECK(s.slots == 2);
  CHECK(s.hits == 1);
  CHECK(s.misses == 3);
  CHECK(w.core->mode() == mru);
}

}  // namespace odmoe
