#include "topology/topology.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "test_paths.h"

namespace odmoe {
namespace {

std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }

std::string Good() {
  return "model: " + Model() + R"(
prediction: shadow
prefill: { mini_batch: 8 }
main: { id: main, address: "127.0.0.1:7700", context: 256 }
shadow:
  id: shadow
  address: localhost:7701
  quantization: q4_0
  alignment: { token_period: 2, kv_period: 0 }
workers:
  memory_budget: 2MiB
  nodes:
    - { id: w0, address: "127.0.0.1:7710" }
    - { id: w1, address: "127.0.0.1:7711", memory_budget: 4MiB, backend: cpu:2 }
    - { id: w2, address: "127.0.0.1:7712" }
    - { id: w3, address: "127.0.0.1:7713" }
)";
}

// Parses `yaml` and expects an error that names the key and says what is wrong.
void ExpectError(const std::string& yaml, const std::string& key, const std::string& what) {
  absl::StatusOr<Topology> t = ParseTopology(yaml, "deploy/x.yaml");
  if (t.ok()) {
    absl::Status s = ValidateTopologyWithModel(*t);
    INFO(yaml);
    REQUIRE(!s.ok());
    t = s;
  }
  const std::string message(t.status().message());
  INFO(message);
  CHECK(message.find("deploy/x.yaml: ") == 0);
  CHECK(message.find(key) != std::string::npos);
  CHECK(message.find(what) != std::string::npos);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("topology: a good file is read into the typed struct", "[topology]") {
  absl::StatusOr<Topology> t = ParseTopology(Good(), "");
  REQUIRE(t.ok());
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->model == Model());
  CHECK(t->prediction == PredictionMode::kShadow);
  CHECK(t->prefill_mini_batch == 8);
  CHECK(t->main.port == 7700);
  CHECK(t->main.host == "127.0.0.1");
  CHECK(t->main.context == 256);
  CHECK(t->main.backend == "cpu:1");
  REQUIRE(t->shadow.has_value());
  CHECK(t->shadow->quantization == DType::kQ4_0);
  CHECK(t->shadow->token_period == 2);
  CHECK(t->shadow->kv_period == 0);
  CHECK(t->shadow->host == "localhost");
  CHECK(t->group_size == 2);  // the model's top-k
  CHECK(t->n_workers() == 4);
  CHECK(t->n_groups() == 2);
  CHECK(t->workers[0].memory_budget == 2u << 20);
  CHECK(t->workers[1].memory_budget == 4u << 20);
  CHECK(t->workers[1].backend == "cpu:2");
  CHECK(t->GroupOfLayer(5) == 1);
  CHECK(t->GroupMembers(1) == std::vector<int>{2, 3});
  CHECK(t->PrefillWorkerOfExpert(6) == 2);
  CHECK(t->WorkerIndex("w2") == 2);
  CHECK(t->FindWorker("nobody") == nullptr);
  CHECK(t->FindNode("shadow") == &*t->shadow);
  CHECK(t->AllNodes().size() == 6);
}

TEST_CASE("topology: the shipped testbed loads", "[topology]") {
  absl::StatusOr<Topology> t = LoadTopology(test::SourcePath("deploy/testbed-10.yaml"));
  REQUIRE(t.ok());
  CHECK(t->n_workers() == 8);
  CHECK(t->n_groups() == 4);
  CHECK(t->group_size == 2);
  CHECK(t->shadow->quantization == DType::kQ8_0);
  CHECK(t->model == std::filesystem::weakly_canonical(Model()).string());
  CHECK(t->AllNodes().size() == 10);
}

TEST_CASE("topology: the shipped top-8 testbed loads, 2 groups of 4", "[topology]") {
  absl::StatusOr<Topology> t = LoadTopology(test::SourcePath("deploy/testbed-10-k8.yaml"));
  REQUIRE(t.ok());
  CHECK(t->n_workers() == 8);
  CHECK(t->group_size == 4);
  CHECK(t->n_groups() == 2);
  CHECK(t->GroupMembers(1) == std::vector<int>{4, 5, 6, 7});
  CHECK(t->AllNodes().size() == 10);
}

TEST_CASE("topology: the shipped LAN example loads, per-node TLS, every node over ssh",
          "[topology]") {
  absl::StatusOr<Topology> t = LoadTopology(test::SourcePath("deploy/lan-10.yaml"));
  INFO(t.status());
  REQUIRE(t.ok());
  CHECK(t->node_tls.per_node());
  CHECK(t->node_tls.ForNode("w3").cert == test::SourcePath("deploy/certs/w3.pem"));
  CHECK(t->AllNodes().size() == 10);
  for (const NodeSpec* n : t->AllNodes()) CHECK(!n->ssh.empty());
  CHECK(t->FirstNonLoopbackNode() != nullptr);  // accepted because of node_tls
}

TEST_CASE("topology: round trip through YAML", "[topology]") {
  absl::StatusOr<Topology> t = ParseTopology(Good(), "");
  REQUIRE(t.ok());
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  absl::StatusOr<Topology> back = ParseTopology(TopologyToYaml(*t), "");
  REQUIRE(back.ok());
  REQUIRE(ValidateTopologyWithModel(*back).ok());
  CHECK(TopologyToYaml(*back) == TopologyToYaml(*t));
  CHECK(back->workers[1].memory_budget == t->workers[1].memory_budget);
  CHECK(back->shadow->token_period == 2);
}

TEST_CASE("topology: every mistake names file, key and expectation", "[topology]") {
  const std::string g = Good();
  ExpectError("[1, 2]", "top level", "mapping");
  ExpectError("model: [unclosed", "line", "YAML");
  ExpectError(Replace(g, "prediction: shadow", "prediction: psychic"), "prediction",
              "shadow | random | none");
  ExpectError(Replace(g, "prediction: shadow", "predicton: shadow"), "predicton", "unknown key");
  ExpectError(Replace(g, "mini_batch: 8", "mini_batch: 0"), "prefill.mini_batch", "[1, ");
  ExpectError(Replace(g, "context: 256", "contxt: 256"), "main.contxt", "unknown key");
  ExpectError(Replace(g, "\"127.0.0.1:7700\"", "\"127.0.0.1\""), "main.address", "host:port");
  ExpectError(Replace(g, "\"127.0.0.1:7700\"", "\"127.0.0.1:99999\""), "main.address", "1..65535");
  ExpectError(Replace(g, "id: main, ", ""), "main.id", "missing");
  ExpectError(Replace(g, "q4_0", "q3_k"), "shadow.quantization",
              "f16 | q8_0 | q6_k | q5_k | q4_k | q4_0");
  ExpectError(Replace(g, "q4_0", "Q4_K_M"), "shadow.quantization", "f16 | q8_0");
  ExpectError(Replace(g, "token_period: 2", "token_period: -1"), "shadow.alignment.token_period",
              "[0, ");
  ExpectError(Replace(g, "kv_period: 0", "kv_period: 0, period: 3"), "shadow.alignment.period",
              "unknown key");
  ExpectError(Replace(g, "memory_budget: 2MiB", "memory_budget: lots"), "workers.memory_budget",
              "byte size");
  ExpectError(Replace(g, "memory_budget: 4MiB", "memory_budget: 1KiB"),
              "workers.nodes[1].memory_budget", "cannot hold the largest expert");
  ExpectError(Replace(g, "id: w2", "id: w1"), "workers.nodes[2].id",
              "already used by workers.nodes[1]");
  ExpectError(Replace(g, "7712", "7711"), "workers.nodes[2].address",
              "port 7711 is already used by workers.nodes[1]");
  // localhost and 127.0.0.1 are the same host.
  ExpectError(Replace(g, "\"127.0.0.1:7710\"", "\"localhost:7701\""), "workers.nodes[0].address",
              "already used by shadow");
  ExpectError(Replace(g, "    - { id: w3, address: \"127.0.0.1:7713\" }\n", ""), "workers.nodes",
              "whole groups of 2");
  ExpectError(Replace(g, "  nodes:", "  group_size: 3\n  nodes:"), "workers.nodes",
              "whole groups of 3");
  ExpectError(Replace(g, "  nodes:", "  group_size: 0\n  nodes:"), "workers.group_size", "[1, ");
  ExpectError(Replace(g, "  memory_budget: 2MiB\n", "  memory_budget: 2MiB\n  group_size: 8\n"),
              "workers.nodes", "fewer than one group of 8");
}

TEST_CASE("topology: structural mistakes", "[topology]") {
  const std::string model = "model: " + Model() + "\n";
  const std::string main = "main: { id: main, address: \"127.0.0.1:7700\" }\n";
  const std::string workers =
      "workers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:1\" }\n"
      "    - { id: b, address: \"127.0.0.1:2\" }\n";
  ExpectError(main + workers, "model", "missing");
  ExpectError(model + workers, "main", "missing");
  ExpectError(model + main, "workers", "missing");
  ExpectError(model + main + "workers:\n  nodes: []\n", "workers.nodes", "missing or empty");
  ExpectError(model + main + workers, "prediction", "needs a shadow section");
  ExpectError(model + "prediction: none\n" + main + workers + "extra: 1\n", "extra", "unknown key");
  ExpectError(model + "prediction: none\nmain: 3\n" + workers, "main", "mapping");
  ExpectError("model: /nonexistent/m.gguf\nprediction: none\n" + main + workers, "model",
              "/nonexistent/m.gguf");
  ExpectError(model + "prediction: none\n" + main + workers + "wire: { hidden_dtype: f8 }\n",
              "wire.hidden_dtype", "f32 | f16");
  CHECK(!LoadTopology("/nonexistent/topology.yaml").ok());
}

TEST_CASE("topology: values of the wrong type or out of range", "[topology]") {
  const std::string g = Good();
  ExpectError(Replace(g, "context: 256", "context: abc"), "main.context", "'abc' is not valid");
  ExpectError(Replace(g, "context: 256", "context: 1.5"), "main.context", "an integer");
  ExpectError(Replace(g, "context: 256", "context: [1]"), "main.context", "<not a scalar>");
  ExpectError(Replace(g, "context: 256", "context: -1"), "main.context", "[0, ");
  ExpectError(Replace(g, "context: 256", "batch: 0"), "main.batch", "[1, ");
  ExpectError(Replace(g, "alignment:", "max_run_ahead: 0\n  alignment:"), "shadow.max_run_ahead",
              "[1, ");
  ExpectError(Replace(g, "\"127.0.0.1:7700\"", "\"127.0.0.1:0\""), "main.address", "1..65535");
  ExpectError(Replace(g, "\"127.0.0.1:7700\"", "\":7700\""), "main.address", "host:port");
  ExpectError(Replace(g, "\"127.0.0.1:7700\"", "\"127.0.0.1:77x\""), "main.address", "host:port");
  ExpectError(Replace(g, "address: localhost:7701", "address: { host: x }"), "shadow.address",
              "expected a string");
  ExpectError(Replace(g, ", address: \"127.0.0.1:7712\"", ""), "workers.nodes[2].address",
              "missing");
  ExpectError(Replace(g, "id: main, ", "id: \"\", "), "main.id", "empty");
  ExpectError(Replace(g, "  memory_budget: 2MiB\n", "  memory_budget: 2MiB\n  mode: lazy\n"),
              "workers.mode", "on_demand | resident");
  ExpectError(Replace(g, "memory_budget: 2MiB", "memory_budget: [2]"), "workers.memory_budget",
              "byte size");
  ExpectError(Replace(g, "prefill: { mini_batch: 8 }", "prefill: 8"), "prefill", "mapping");
  ExpectError(Replace(g, "  nodes:\n", "  nodes: { w0: 1 }\n  extra:\n"), "workers.nodes",
              "list of workers");
  ExpectError(Replace(g, "    - { id: w2, address: \"127.0.0.1:7712\" }", "    - w2"),
              "workers.nodes[2]", "mapping with id and address");
  // The top of the range is a valid port.
  absl::StatusOr<Topology> t =
      ParseTopology(Replace(g, "\"127.0.0.1:7700\"", "\"127.0.0.1:65535\""), "");
  REQUIRE(t.ok());
  CHECK(t->main.port == 65535);
}

TEST_CASE("topology: names that become files and commands stay plain", "[topology]") {
  const std::string g = Good();
  ExpectError(Replace(g, "id: w1", "id: ../../etc/w1"), "workers.nodes[1].id",
              "'../../etc/w1' is not valid (expected up to 64 letters");
  ExpectError(Replace(g, "id: w1", "id: \"w 1\""), "workers.nodes[1].id", "not valid");
  ExpectError(Replace(g, "id: w1", "id: -w1"), "workers.nodes[1].id", "not starting with '-'");
  ExpectError(Replace(g, "id: w1", "id: " + std::string(65, 'w')), "workers.nodes[1].id",
              "up to 64");
  ExpectError(Replace(g, "backend: cpu:2", "backend: cpu:2, ssh: \"-oProxyCommand=x\""),
              "workers.nodes[1].ssh", "user@host");
  ExpectError(Replace(g, "backend: cpu:2", "backend: cpu:2, ssh: \"me@host; rm\""),
              "workers.nodes[1].ssh", "user@host");
  ExpectError(Replace(g, "backend: cpu:2", "backend: cpu:2, netns: a/b"), "workers.nodes[1].netns",
              "network namespace name");
  absl::StatusOr<Topology> t = ParseTopology(
      Replace(g, "backend: cpu:2", "backend: cpu:2, ssh: me@10.0.0.5, netns: n.1"), "");
  REQUIRE(t.ok());
  CHECK(t->workers[1].ssh == "me@10.0.0.5");
}

TEST_CASE("topology: a key written twice is an error", "[topology]") {
  const std::string g = Good();
  ExpectError(Replace(g, "prediction: shadow", "prediction: shadow\nprediction: none"),
              "prediction", "appears twice");
  ExpectError(Replace(g, "context: 256", "context: 256, context: 128"), "main.context",
              "appears twice");
  ExpectError(Replace(g, "id: w3,", "id: w3, id: w4,"), "workers.nodes[3].id", "appears twice");
}

TEST_CASE("topology: the main node's HTTP API settings", "[topology]") {
  const std::string g = Good();
  const std::string http =
      Replace(g, "context: 256", "context: 256, http: \"localhost:8080\", api_key: k");
  absl::StatusOr<Topology> t = ParseTopology(http, "");
  REQUIRE(t.ok());
  CHECK(t->main.http_host == "localhost");
  CHECK(t->main.http_port == 8080);
  CHECK(t->main.api_key == "k");
  ExpectError(Replace(g, "context: 256", "http: \"127.0.0.1\""), "main.http", "host:port");
  // The API may not take a node's port (localhost is 127.0.0.1).
  ExpectError(Replace(g, "context: 256", "http: \"localhost:7711\""), "main.http",
              "already used by workers.nodes[1]");
  ExpectError(Replace(g, "context: 256", "tls: { cert: c.pem }"), "main.tls.key", "missing");
  ExpectError(Replace(g, "context: 256", "tls: { cert: c.pem, key: k.pem, ca: x }"), "main.tls.ca",
              "unknown key");
  ExpectError(Replace(g, "context: 256", "tls: c.pem"), "main.tls", "mapping");
  ExpectError(Replace(g, "context: 256", "max_queue: -1"), "main.max_queue", "[0, ");
  ExpectError(Replace(g, "context: 256", "max_body_bytes: 100"), "main.max_body_bytes",
              "[4KiB, 1GiB]");
  ExpectError(Replace(g, "context: 256", "max_body_bytes: lots"), "main.max_body_bytes", "");
  ExpectError(Replace(g, "context: 256", "http_limits: { max_connections: 0 }"),
              "main.http_limits.max_connections", "");
  ExpectError(Replace(g, "context: 256", "http_limits: { header_timeout_ms: 5 }"),
              "main.http_limits.header_timeout_ms", "");
  ExpectError(Replace(g, "context: 256", "http_limits: { max_header_bytes: 100 }"),
              "main.http_limits.max_header_bytes", "[1024, 1048576]");
  ExpectError(Replace(g, "context: 256", "http_limits: { socket_send_buffer_bytes: 1 }"),
              "main.http_limits.socket_send_buffer_bytes", "");
  ExpectError(Replace(g, "context: 256", "http_limits: { timeout: 5 }"), "main.http_limits",
              "unknown key");
}

TEST_CASE("topology: relative paths resolve against the file", "[topology]") {
  const auto dir = std::filesystem::temp_directory_path() / "odmoe_topology_test";
  std::filesystem::create_directories(dir / "sub");
  std::filesystem::copy_file(Model(), dir / "m.gguf",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "sub" / "t.yaml")
      << "model: ../m.gguf\nprediction: none\nmain: { id: m, address: \"127.0.0.1:1\" }\n"
         "workers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:2\" }\n"
         "    - { id: b, address: \"127.0.0.1:3\", ssh: me@host2, netns: ns-b }\n";
  absl::StatusOr<Topology> t = LoadTopology((dir / "sub" / "t.yaml").string());
  REQUIRE(t.ok());
  CHECK(t->model == (dir / "m.gguf").string());
  CHECK(t->workers[1].ssh == "me@host2");
  CHECK(t->workers[1].netns == "ns-b");
  std::filesystem::remove_all(dir);
}

TEST_CASE("topology: byte sizes", "[topology]") {
  CHECK(*ParseByteSize("1048576") == 1048576u);
  CHECK(*ParseByteSize("96MiB") == 96ull << 20);
  CHECK(*ParseByteSize("1.5GiB") == 3ull << 29);
  CHECK(*ParseByteSize("512KiB") == 512ull << 10);
  CHECK(*ParseByteSize("64MB") == 64000000u);
  CHECK(*ParseByteSize(" 2 gib ") == 2ull << 30);
  for (const char* bad : {"", "MiB", "-1MiB", "1.5.3", "12XB", "1e40", "nan"}) {
    INFO(bad);
    CHECK(!ParseByteSize(bad).ok());
  }
}

}  // namespace odmoe

namespace odmoe {

TEST_CASE("topology: damaged files are errors, never crashes", "[topology]") {
  const std::string good = Good();
  std::mt19937 rng(20261122);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:  // delete a few bytes
          text.erase(at, 1 + rng() % 8);
          break;
        case 1:  // a random byte, YAML syntax or not
          text[at] = static_cast<char>(rng() % 256);
          break;
        case 2:  // a YAML special character
          text.insert(at, 1, ":-[]{}&*!|>'\"%@`#,?\t\n"[rng() % 22]);
          break;
        default:  // a line moved elsewhere
          text.insert(at, good.substr(rng() % good.size(), 1 + rng() % 40));
      }
      if (text.empty()) text = "x";
    }
    absl::StatusOr<Topology> t = ParseTopology(text, "deploy/x.yaml");
    absl::Status s = t.ok() ? ValidateTopologyWithModel(*t) : t.status();
    if (s.ok()) {
      ++parsed;
      continue;
    }
    INFO(text);
    INFO(s.message());
    REQUIRE(s.message().substr(0, 15) == "deploy/x.yaml: ");
  }
  // Some edits keep the file valid (a changed digit in a port, say); most do not.
  CHECK(parsed > 0);
  CHECK(parsed < 2000);
  // Nesting far deeper than any topology.
  const std::string deep = "model: " + std::string(100000, '[') + "\n";
  absl::StatusOr<Topology> t = ParseTopology(deep, "deploy/x.yaml");
  REQUIRE(!t.ok());
  CHECK(t.status().message().substr(0, 15) == "deploy/x.yaml: ");
}

}  // namespace odmoe
