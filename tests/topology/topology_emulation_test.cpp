// The benchmark-facing worker settings: the emulated load bandwidth (workers
// and per node), the lru_cache baseline mode with its cache size; parsed,
// checked, and written back by TopologyToYaml.
#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "test_paths.h"
#include "topology/topology.h"

namespace odmoe {
namespace {

std::string Yaml(const std::string& prediction, const std::string& workers_extra,
                 const std::string& node_extra = "") {
  return "model: " + test::SourcePath("models/tiny-mixtral-f16.gguf") + "\nprediction: " +
         prediction + R"(
main: { id: main, address: 127.0.0.1:7700 }
workers:
)" + workers_extra +
         "  nodes:\n    - { id: w0, address: 127.0.0.1:7710" + node_extra +
         " }\n    - { id: w1, address: 127.0.0.1:7711 }\n";
}

TEST_CASE("topology: load_bandwidth and lru_cache parse and round-trip", "[topology]") {
  auto t = ParseTopology(Yaml("none", "  mode: lru_cache\n  cache_experts: 12\n  "
                                      "load_bandwidth: 2GB/s\n",
                              ", load_bandwidth: 800MiB/s"),
                         "t.yaml");
  REQUIRE(t.ok());
  CHECK(t->worker_mode == WorkerMode::kLruCache);
  CHECK(t->cache_experts == 12);
  CHECK(t->workers[0].load_bandwidth == 800ull * 1048576);
  CHECK(t->workers[1].load_bandwidth == 2'000'000'000ull);
  auto back = ParseTopology(TopologyToYaml(*t), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->worker_mode == WorkerMode::kLruCache);
  CHECK(back->cache_experts == 12);
  CHECK(back->workers[0].load_bandwidth == t->workers[0].load_bandwidth);
  CHECK(back->workers[1].load_bandwidth == t->workers[1].load_bandwidth);

  auto plain = ParseTopology(Yaml("none", "  load_bandwidth: off\n"), "t.yaml");
  REQUIRE(plain.ok());
  CHECK(plain->workers[0].load_bandwidth == 0);
  CHECK(plain->worker_mode == WorkerMode::kOnDemand);
  CHECK(WorkerModeName(WorkerMode::kLruCache) == "lru_cache");
}

TEST_CASE("topology: wire.emulated_delay", "[topology]") {
  auto with = [](const std::string& v) {
    return ParseTopology("wire: { emulated_delay: " + v + " }\n" + Yaml("none", ""), "t.yaml");
  };
  CHECK(with("250us").value().wire_delay_us == 250);
  CHECK(with("1.5ms").value().wire_delay_us == 1500);
  CHECK(with("0").value().wire_delay_us == 0);
  auto t = with("2ms").value();
  CHECK(ParseTopology(TopologyToYaml(t), "b.yaml").value().wire_delay_us == 2000);
  for (const std::string bad : {"250", "fast", "-1ms", "11s", "[1]"}) {
    auto r = with(bad);
    INFO(bad);
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find("wire.emulated_delay") != std::string::npos);
  }
}

TEST_CASE("topology: bad emulation settings name the key", "[topology]") {
  auto expect = [](const std::string& yaml, const std::string& key, const std::string& what) {
    auto t = ParseTopology(yaml, "t.yaml");
    REQUIRE(!t.ok());
    const std::string m(t.status().message());
    INFO(m);
    CHECK(m.find(key) != std::string::npos);
    CHECK(m.find(what) != std::string::npos);
  };
  expect(Yaml("none", "  load_bandwidth: fast\n"), "workers.load_bandwidth", "not a rate");
  expect(Yaml("none", "  load_bandwidth: -5MB/s\n"), "workers.load_bandwidth", "not a rate");
  expect(Yaml("none", "", ", load_bandwidth: [1]"), "workers.nodes[0].load_bandwidth",
         "expected a rate");
  expect(Yaml("none", "  mode: lru_cache\n  cache_experts: 0\n"), "workers.cache_experts",
         "expected an integer");
  expect(Yaml("random", "  mode: lru_cache\n"), "prediction", "lru_cache");
  CHECK(ParseByteRate("1.5GB/s").value() == 1'500'000'000ull);
  CHECK(ParseByteRate("1000").value() == 1000);
  CHECK(ParseByteRate("1Gbit/s").value() == 125'000'000ull);
  CHECK(ParseByteRate("100Mbit/s").value() == 12'500'000ull);
  CHECK(!ParseByteRate("-1Gbit/s").ok());
  CHECK(!ParseByteRate("Gbit/s").ok());
  CHECK(!ParseByteRate("0").ok());
  CHECK(!ParseByteRate("/s").ok());
}

}  // namespace
}  // namespace odmoe

namespace odmoe {

TEST_CASE("topology: the cache modes, workers.utility and sub_expert parse and round-trip",
          "[topology]") {
  auto lfu = ParseTopology(Yaml("none", "  mode: lfu_cache\n  cache_experts: 5\n"), "t.yaml");
  REQUIRE(lfu.ok());
  CHECK(lfu->worker_mode == WorkerMode::kLfuCache);
  CHECK(IsCacheMode(lfu->worker_mode));
  CHECK(WorkerModeName(WorkerMode::kLfuCache) == "lfu_cache");
  // The utility cache needs a predictor (here the gate look-ahead).
  auto u = ParseTopology(Yaml("lookahead", "  mode: utility_cache\n  cache_experts: 6\n"
                                           "  utility: { window: 4, levels: 3, threshold: 2 }\n"
                                           "  sub_expert: true\n"),
                         "t.yaml");
  REQUIRE(u.ok());
  CHECK(u->worker_mode == WorkerMode::kUtilityCache);
  CHECK(WorkerModeName(WorkerMode::kUtilityCache) == "utility_cache");
  CHECK(u->utility == UtilitySpec{.window = 4, .levels = 3, .threshold = 2});
  CHECK(u->sub_expert);
  auto back = ParseTopology(TopologyToYaml(*u), "back.yaml");
  REQUIRE(back.ok());
  CHECK(back->worker_mode == WorkerMode::kUtilityCache);
  CHECK(back->cache_experts == 6);
  CHECK(back->utility == u->utility);
  CHECK(back->sub_expert);
  CHECK(!ParseTopology(Yaml("none", ""), "t.yaml").value().sub_expert);  // off by default
  // The lossy policies: off unless asked for, and round-trip.
  const Topology plain = ParseTopology(Yaml("none", ""), "t.yaml").value();
  CHECK(!plain.degrade);
  CHECK(!plain.mixed_precision.has_value());
  auto lossy = ParseTopology(
      Yaml("none", "  degrade: true\n  mixed_precision: { type: q4_k, floor: 0.25 }\n"), "t.yaml");
  REQUIRE(lossy.ok());
  CHECK(lossy->degrade);
  REQUIRE(lossy->mixed_precision.has_value());
  CHECK(*lossy->mixed_precision == MixedPrecisionSpec{.type = DType::kQ4_K, .floor = 0.25});
  auto lossy_back = ParseTopology(TopologyToYaml(*lossy), "back.yaml");
  REQUIRE(lossy_back.ok());
  CHECK(lossy_back->degrade);
  CHECK(lossy_back->mixed_precision == lossy->mixed_precision);
  CHECK(ParseTopology(Yaml("none", "  mixed_precision: { type: q4_0 }\n"), "t.yaml")
            .value()
            .mixed_precision->floor == 0.5);
  for (const auto& [prediction, workers, needle] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"lookahead", "  mode: lfu_cache\n", "caching baselines use no prediction"},
           {"none", "  mode: utility_cache\n", "fed by predictions"},
           {"lookahead", "  mode: utility_cache\n  utility: { levels: 2, threshold: 3 }\n",
            "above levels"},
           {"lookahead", "  mode: utility_cache\n  utility: { window: 0 }\n", "window"},
           {"lookahead", "  mode: utility_cache\n  utility: { gamma: 8 }\n", "unknown key"},
           {"none", "  sub_expert: maybe\n", "sub_expert"},
           {"none", "  mixed_precision: { type: f32 }\n", "type"},
           {"none", "  mixed_precision: { floor: 1.5 }\n", "floor"},
           {"none", "  mixed_precision: { floor: x }\n", "floor"},
           {"none", "  mixed_precision: { bits: 4 }\n", "unknown key"},
           {"none", "  degrade: 1\n", "degrade"}}) {
    INFO(workers);
    auto r = ParseTopology(Yaml(prediction, workers), "t.yaml");
    REQUIRE(!r.ok());
    CHECK(std::string(r.status().message()).find(needle) != std::string::npos);
  }
}

}  // namespace odmoe
