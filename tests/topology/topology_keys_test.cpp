// The key declarations (topology/topology_keys.h): the reference in
// docs/cluster.md is the one they make, every key is in it with its default
// and bounds, and the declared bounds are what the reader enforces.
#include "topology/topology_keys.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_paths.h"

namespace odmoe {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Yaml(const std::string& main_extra, const std::string& top = "") {
  return "model: " + test::SourcePath("models/tiny-mixtral-f16.gguf") + "\nprediction: none\n" +
         top + "main: { id: m, address: \"127.0.0.1:1\"" + main_extra +
         " }\nworkers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:2\" }\n";
}

}  // namespace

TEST_CASE("topology keys: docs/cluster.md holds the reference the declarations make",
          "[topology][keys]") {
  const std::string doc = Read(test::SourcePath("docs/cluster.md"));
  REQUIRE(!doc.empty());
  absl::StatusOr<std::string> expected = WithTopologyKeys(doc);
  INFO(expected.status());
  REQUIRE(expected.ok());
  INFO("regenerate it: build/bin/odmoe-topology-keys --update docs/cluster.md");
  CHECK(*expected == doc);
}

TEST_CASE("topology keys: the reference names every key with its default and bounds",
          "[topology][keys]") {
  const std::string table = TopologyKeysMarkdown();
  for (const char* row :
       {"| `main.http_limits.max_connections` | integer | `512` | 1..100000 |",
        "| `main.max_body_bytes` | byte size | `8MiB` | 4KiB..1GiB |",
        "| `main.id` | name | required |",
        "| `workers.nodes[].memory_budget` | byte size | "
        "`workers.memory_budget` |",
        "| `prefill.mini_batch` | integer | `auto` | 1..4096 or `auto` |",
        "| `wire.hidden_dtype` | one of | `f32` | `f32`, `f16` |",
        "| `shadow.draft_wait` | delay | `0` | 0..10s", "| `workers.mode` | one of | `on_demand` |",
        "| `workers.nodes` | list | required |",
        "| `shadow.alignment.kv_period` | integer | `1` |"}) {
    INFO(row);
    CHECK(table.find(row) != std::string::npos);
  }
  // The markers are required; what lies between them is replaced.
  CHECK(!WithTopologyKeys("no markers here").ok());
  absl::StatusOr<std::string> doc = WithTopologyKeys(std::string("a\n") + kTopologyKeysBegin +
                                                     "\nold\n" + kTopologyKeysEnd + "\nb\n");
  REQUIRE(doc.ok());
  CHECK(*doc ==
        std::string("a\n") + kTopologyKeysBegin + "\n" + table + kTopologyKeysEnd + "\nb\n");
}

TEST_CASE("topology keys: a value past its declared bounds names key, value and bounds",
          "[topology][keys]") {
  const auto error = [](const std::string& yaml) {
    absl::StatusOr<Topology> t = ParseTopology(yaml, "k.yaml");
    REQUIRE(!t.ok());
    return std::string(t.status().message());
  };
  CHECK(error(Yaml(", http_limits: { io_threads: 65 }")) ==
        "k.yaml: main.http_limits.io_threads: '65' is not valid (expected an integer in [1, 64])");
  CHECK(error(Yaml(", http_limits: { stream_buffer_bytes: 2GiB }")) ==
        "k.yaml: main.http_limits.stream_buffer_bytes: 2147483648 bytes is outside [4KiB, 1GiB] = "
        "[4096, 1073741824] (expected a byte size such as 16KiB)");
  CHECK(error(Yaml("", "prefill: { mini_batch: 0 }\n")) ==
        "k.yaml: prefill.mini_batch: '0' is not valid (expected an integer in [1, 4096] or auto)");
  CHECK(error(Yaml("", "wire: { emulated_delay: 20s }\n")) ==
        "k.yaml: wire.emulated_delay: '20s' is not a delay (expected e.g. 250us, 1.5ms or 0; at "
        "most 10s)");
  CHECK(
      error(Yaml(", http_limits: { io_thread: 2 }"))
          .find(
              "k.yaml: main.http_limits.io_thread: unknown key (expected one of: body_timeout_ms, "
              "header_timeout_ms, idle_timeout_ms, io_threads,") == 0);
  // 0 is the kernel's send buffer, outside the bounds on purpose; 1 is not.
  CHECK(ParseTopology(Yaml(", http_limits: { socket_send_buffer_bytes: 0 }"), "k.yaml").ok());
  CHECK(error(Yaml(", http_limits: { socket_send_buffer_bytes: 1 }")).find("[4KiB, 64MiB]") !=
        std::string::npos);
}

TEST_CASE("topology keys: a written topology leaves out only what is unset", "[topology][keys]") {
  absl::StatusOr<Topology> t = ParseTopology(Yaml(""), "k.yaml");
  REQUIRE(t.ok());
  const std::string yaml = TopologyToYaml(*t);
  INFO(yaml);
  for (const char* unset : {"shadow", "insecure", "ssh", "api_key", "tls", "memory_budget"}) {
    INFO(unset);
    CHECK(yaml.find(unset) == std::string::npos);
  }
  for (const char* set : {"prediction: none", "io_threads: 2", "batch: 64", "mode: on_demand"}) {
    INFO(set);
    CHECK(yaml.find(set) != std::string::npos);
  }
  t->main.http_limits.io_threads = 5;
  t->main.max_queue = 0;                      // 0, but not the default: written
  t->mixed_precision = MixedPrecisionSpec{};  // present with its defaults
  const std::string changed = TopologyToYaml(*t);
  INFO(changed);
  CHECK(changed.find("io_threads: 5") != std::string::npos);
  CHECK(changed.find("max_queue: 0") != std::string::npos);
  absl::StatusOr<Topology> back = ParseTopology(changed, "k.yaml");
  REQUIRE(back.ok());
  CHECK(back->main.http_limits.io_threads == 5);
  CHECK(back->main.max_queue == 0);
  CHECK(back->mixed_precision == MixedPrecisionSpec{});
}

TEST_CASE("topology keys: every shipped topology reads back as it was written",
          "[topology][keys]") {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::SourcePath("deploy"))) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    absl::StatusOr<Topology> t = LoadTopology(entry.path().string());
    REQUIRE(t.ok());
    const std::string written = TopologyToYaml(*t);
    absl::StatusOr<Topology> back = ParseTopology(written, "/elsewhere/copy.yaml");
    INFO(written << "\n" << back.status());
    REQUIRE((back.ok() && ValidateTopologyWithModel(*back).ok()));
    CHECK(TopologyToYaml(*back) == written);
    CHECK(back->n_workers() == t->n_workers());
    CHECK(back->node_tls.cert == t->node_tls.cert);
    ++files;
  }
  CHECK(files >= 3);
}

}  // namespace odmoe
