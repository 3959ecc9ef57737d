// Every field of the topology: read from YAML, written back by TopologyToYaml
// and read again gives the same struct, field by field (comparing the two YAML
// texts alone would not notice a field that TopologyToYaml forgets).
#include <catch2/catch.hpp>

#include "model/model_file.h"
#include "test_paths.h"
#include "topology/topology.h"

namespace odmoe {
namespace {

std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }

// Every key set to something other than its default.
std::string Everything() {
  return "model: " + Model() + R"(
prediction: random
prefill: { mini_batch: 3, message_cost: 45us }
wire: { hidden_dtype: f16, link_bandwidth: 1Gbit/s }
lookahead: { layers: 3, candidates: 4, from_layer: 2 }
insecure: true
cluster_secret_file: secrets/cluster.secret
main:
  id: head.node
  address: "[::1]:7700"
  backend: cpu:4
  ssh: ops@edge-a
  netns: ns_main
  context: 300
  batch: 7
  http: 0.0.0.0:8080
  api_key: "s3cr:et #not a comment"
  tls: { cert: certs/server.pem, key: /etc/odmoe/key.pem }
  max_queue: 0
  max_body_bytes: 64KiB
  http_limits: { max_connections: 9, max_connections_per_client: 5, max_buffered_body_bytes: 2MiB, io_threads: 3, max_header_bytes: 4KiB, header_timeout_ms: 1100, body_timeout_ms: 1200, idle_timeout_ms: 1300, write_timeout_ms: 1400, stream_buffer_bytes: 1MiB, socket_send_buffer_bytes: 64KiB }
shadow:
  id: shadow
  address: 10.0.0.2:7701
  backend: cpu:2
  quantization: f16
  model: shadow copy.gguf
  alignment: { token_period: 0, kv_period: 5 }
  max_run_ahead: 9
  draft_tokens: 5
  draft_wait: 3ms
workers:
  group_size: 2
  mode: resident
  memory_budget: 1.5GiB
  host_compute: true
  host_compute_slowdown: 6
  backend: cpu:3
  nodes:
    - { id: "1", address: 10.0.0.10:7710, ssh: 10.0.0.10 }
    - { id: "yes", address: 10.0.0.11:7710, memory_budget: 64MB, backend: cpu:1, netns: w-1 }
)";
}

void ExpectSameNode(const NodeSpec& a, const NodeSpec& b) {
  CHECK(a.id == b.id);
  CHECK(a.address == b.address);
  CHECK(a.host == b.host);
  CHECK(a.port == b.port);
  CHECK(a.backend == b.backend);
  CHECK(a.ssh == b.ssh);
  CHECK(a.netns == b.netns);
}

void ExpectSame(const Topology& a, const Topology& b) {
  CHECK(a.model == b.model);
  CHECK(a.prediction == b.prediction);
  CHECK(a.prefill_mini_batch == b.prefill_mini_batch);
  CHECK(a.prefill_message_cost_us == b.prefill_message_cost_us);
  CHECK(a.link_bandwidth == b.link_bandwidth);
  CHECK(a.host_compute == b.host_compute);
  CHECK(a.host_compute_slowdown == b.host_compute_slowdown);
  CHECK(a.wire_dtype == b.wire_dtype);
  CHECK(a.insecure == b.insecure);
  CHECK(a.cluster_secret_file == b.cluster_secret_file);
  ExpectSameNode(a.main, b.main);
  CHECK(a.main.context == b.main.context);
  CHECK(a.main.batch == b.main.batch);
  CHECK(a.main.http == b.main.http);
  CHECK(a.main.http_host == b.main.http_host);
  CHECK(a.main.http_port == b.main.http_port);
  CHECK(a.main.api_key == b.main.api_key);
  CHECK(a.main.tls_cert == b.main.tls_cert);
  CHECK(a.main.tls_key == b.main.tls_key);
  CHECK(a.main.max_queue == b.main.max_queue);
  CHECK(a.main.max_body_bytes == b.main.max_body_bytes);
  const HttpLimits& la = a.main.http_limits;
  const HttpLimits& lb = b.main.http_limits;
  CHECK(la.max_connections == lb.max_connections);
  CHECK(la.max_connections_per_client == lb.max_connections_per_client);
  CHECK(la.max_buffered_body_bytes == lb.max_buffered_body_bytes);
  CHECK(la.io_threads == lb.io_threads);
  CHECK(la.max_header_bytes == lb.max_header_bytes);
  CHECK(la.header_timeout_ms == lb.header_timeout_ms);
  CHECK(la.body_timeout_ms == lb.body_timeout_ms);
  CHECK(la.idle_timeout_ms == lb.idle_timeout_ms);
  CHECK(la.write_timeout_ms == lb.write_timeout_ms);
  CHECK(la.stream_buffer_bytes == lb.stream_buffer_bytes);
  CHECK(la.socket_send_buffer_bytes == lb.socket_send_buffer_bytes);
  REQUIRE(a.shadow.has_value() == b.shadow.has_value());
  if (a.shadow) {
    ExpectSameNode(*a.shadow, *b.shadow);
    CHECK(a.shadow->quantization == b.shadow->quantization);
    CHECK(a.shadow->model == b.shadow->model);
    CHECK(a.shadow->token_period == b.shadow->token_period);
    CHECK(a.shadow->kv_period == b.shadow->kv_period);
    CHECK(a.shadow->max_run_ahead == b.shadow->max_run_ahead);
    CHECK(a.shadow->draft_tokens == b.shadow->draft_tokens);
    CHECK(a.shadow->draft_wait_us == b.shadow->draft_wait_us);
  }
  CHECK(a.lookahead == b.lookahead);
  CHECK(a.group_size == b.group_size);
  CHECK(a.worker_mode == b.worker_mode);
  REQUIRE(a.workers.size() == b.workers.size());
  for (size_t i = 0; i < a.workers.size(); ++i) {
    INFO("worker " << i);
    ExpectSameNode(a.workers[i], b.workers[i]);
    CHECK(a.workers[i].memory_budget == b.workers[i].memory_budget);
  }
}

}  // namespace

TEST_CASE("topology: every key is read", "[topology]") {
  absl::StatusOr<Topology> t = ParseTopology(Everything(), "/srv/odmoe/cluster.yaml");
  INFO(t.status());
  REQUIRE(t.ok());
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->path == "/srv/odmoe/cluster.yaml");
  CHECK(t->prediction == PredictionMode::kRandom);
  CHECK(t->prefill_mini_batch == 3);
  CHECK(t->prefill_message_cost_us == 45);
  CHECK(t->link_bandwidth == 125'000'000ull);
  CHECK(t->wire_dtype == WireDType::kF16);
  CHECK(t->lookahead == LookaheadSpec{3, 4, 2});
  CHECK(t->insecure);
  CHECK(t->cluster_secret_file == "/srv/odmoe/secrets/cluster.secret");  // relative to the file
  CHECK(t->main.id == "head.node");
  CHECK(t->main.host == "::1");
  CHECK(t->main.port == 7700);
  CHECK(t->main.backend == "cpu:4");
  CHECK(t->main.ssh == "ops@edge-a");
  CHECK(t->main.netns == "ns_main");
  CHECK(t->main.context == 300);
  CHECK(t->main.batch == 7);
  CHECK(t->main.http_host == "0.0.0.0");
  CHECK(t->main.http_port == 8080);
  CHECK(t->main.api_key == "s3cr:et #not a comment");
  CHECK(t->main.tls_cert == "/srv/odmoe/certs/server.pem");  // relative to the file
  CHECK(t->main.tls_key == "/etc/odmoe/key.pem");
  CHECK(t->main.max_queue == 0);
  CHECK(t->main.max_body_bytes == 64u << 10);
  const HttpLimits& l = t->main.http_limits;
  CHECK(l.max_connections == 9);
  CHECK(l.max_connections_per_client == 5);
  CHECK(l.max_buffered_body_bytes == 2u << 20);
  CHECK(l.io_threads == 3);
  CHECK(l.max_header_bytes == 4u << 10);
  CHECK(l.header_timeout_ms == 1100);
  CHECK(l.body_timeout_ms == 1200);
  CHECK(l.idle_timeout_ms == 1300);
  CHECK(l.write_timeout_ms == 1400);
  CHECK(l.stream_buffer_bytes == 1u << 20);
  CHECK(l.socket_send_buffer_bytes == 64u << 10);
  REQUIRE(t->shadow.has_value());
  CHECK(t->shadow->quantization == DType::kF16);
  CHECK(t->shadow->model == "/srv/odmoe/shadow copy.gguf");
  CHECK(t->shadow->token_period == 0);
  CHECK(t->shadow->kv_period == 5);
  CHECK(t->shadow->max_run_ahead == 9);
  CHECK(t->shadow->draft_tokens == 5);
  CHECK(t->shadow->draft_wait_us == 3000);
  CHECK(t->max_task_rows() == 6);  // draft_tokens + 1 > prefill.mini_batch 3
  CHECK(t->worker_mode == WorkerMode::kResident);
  CHECK(t->host_compute);
  CHECK(t->host_compute_slowdown == 6);
  CHECK(t->workers[0].id == "1");  // ids are text even when YAML could read a number
  CHECK(t->workers[0].memory_budget == 3ull << 29);  // the workers' default
  CHECK(t->workers[0].backend == "cpu:3");
  CHECK(t->workers[0].ssh == "10.0.0.10");
  CHECK(t->workers[1].id == "yes");
  CHECK(t->workers[1].memory_budget == 64000000u);
  CHECK(t->workers[1].backend == "cpu:1");
  CHECK(t->workers[1].netns == "w-1");
}

TEST_CASE("topology: defaults of every optional key", "[topology]") {
  absl::StatusOr<Topology> t = ParseTopology(
      "model: " + Model() +
          "\nmain: { id: m, address: \"127.0.0.1:1\" }\nshadow: { id: s, address: "
          "\"127.0.0.1:2\" }\nworkers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:3\" }\n"
          "    - { id: b, address: \"127.0.0.1:4\" }\n",
      "");
  REQUIRE(t.ok());
  CHECK(t->group_size == 0);  // until the model is known
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->group_size == 2);
  CHECK(t->prediction == PredictionMode::kShadow);
  CHECK(t->prefill_mini_batch == Topology::kAutoMiniBatch);
  CHECK(t->max_task_rows() == t->main.batch);  // auto: a message holds up to a chunk's rows
  CHECK(t->prefill_message_cost_us == 30);
  CHECK(t->link_bandwidth == 0);
  CHECK(!t->host_compute);
  CHECK(t->host_compute_slowdown == 1);
  CHECK(t->wire_dtype == WireDType::kF32);
  CHECK(t->lookahead == LookaheadSpec{1, 0, 0});
  CHECK(!t->insecure);
  CHECK(t->cluster_secret_file.empty());  // odmoe-cluster up generates one
  CHECK(t->main.backend == "cpu:1");
  CHECK(t->main.context == 0);
  CHECK(t->main.batch == 64);
  CHECK(t->main.http.empty());
  CHECK(t->main.http_port == 0);
  CHECK(t->main.max_queue == 16);
  CHECK(t->main.max_body_bytes == 8u << 20);
  CHECK(t->main.http_limits.max_connections == 512);
  CHECK(t->main.http_limits.io_threads == 2);
  CHECK(t->main.http_limits.max_header_bytes == 16u << 10);
  CHECK(t->main.http_limits.header_timeout_ms == 10000);
  CHECK(t->main.http_limits.stream_buffer_bytes == 4u << 20);
  CHECK(t->main.http_limits.socket_send_buffer_bytes == 0);
  CHECK(t->shadow->quantization == DType::kQ8_0);
  CHECK(t->shadow->model.empty());
  CHECK(t->shadow->token_period == 1);
  CHECK(t->shadow->kv_period == 1);
  CHECK(t->shadow->max_run_ahead == 4);
  CHECK(t->shadow->draft_tokens == 0);  // speculative decoding off
  CHECK(t->shadow->draft_wait_us == 0);
  CHECK(t->max_task_rows() == 64);  // auto mini-batches: up to main.batch rows
  CHECK(t->worker_mode == WorkerMode::kOnDemand);
  CHECK(t->workers[0].memory_budget == 0);
  CHECK(t->workers[1].backend == "cpu:1");
  CHECK(t->workers[1].ssh.empty());
  CHECK(t->workers[1].netns.empty());
}

TEST_CASE("topology: every field survives TopologyToYaml", "[topology]") {
  absl::StatusOr<Topology> t = ParseTopology(Everything(), "/srv/odmoe/cluster.yaml");
  REQUIRE(t.ok());
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  const std::string yaml = TopologyToYaml(*t);
  INFO(yaml);
  // Written paths are absolute, so the text reads the same from anywhere.
  absl::StatusOr<Topology> back = ParseTopology(yaml, "/elsewhere/copy.yaml");
  INFO(back.status());
  REQUIRE(back.ok());
  REQUIRE(ValidateTopologyWithModel(*back).ok());
  ExpectSame(*t, *back);
  CHECK(TopologyToYaml(*back) == yaml);
}

TEST_CASE("topology: every shadow quantization is read and written back", "[topology]") {
  const std::pair<const char*, DType> values[] = {{"f16", DType::kF16},   {"q8_0", DType::kQ8_0},
                                                  {"q6_k", DType::kQ6_K}, {"q5_k", DType::kQ5_K},
                                                  {"q4_k", DType::kQ4_K}, {"q4_0", DType::kQ4_0}};
  for (const auto& [name, type] : values) {
    INFO(name);
    std::string yaml = Everything();
    const size_t at = yaml.find("quantization: f16");
    REQUIRE(at != std::string::npos);
    yaml.replace(at, 17, std::string("quantization: ") + name);
    absl::StatusOr<Topology> t = ParseTopology(yaml, "/srv/odmoe/cluster.yaml");
    REQUIRE(t.ok());
    CHECK(t->shadow->quantization == type);
    const std::string written = TopologyToYaml(*t);
    CHECK(written.find(std::string("quantization: ") + name) != std::string::npos);
    absl::StatusOr<Topology> back = ParseTopology(written, "/elsewhere/copy.yaml");
    REQUIRE(back.ok());
    CHECK(back->shadow->quantization == type);
  }
}

TEST_CASE("topology: the shipped model fixes the groups", "[topology]") {
  absl::StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(Model());
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  REQUIRE(c.n_expert_used == 2);
  REQUIRE(c.n_expert == 8);
  REQUIRE(c.n_layer == 8);
  auto topology = [&](const std::string& workers_extra, const std::string& budget) {
    std::string yaml = "model: " + Model() +
                       "\nprediction: none\nmain: { id: m, address: \"127.0.0.1:1\" }\n"
                       "workers:\n" +
                       workers_extra + "  nodes:\n";
    for (int i = 0; i < 8; ++i) {
      yaml += "    - { id: w" + std::to_string(i) +
              ", address: \"127.0.0.1:" + std::to_string(7710 + i) + "\"" + budget + " }\n";
    }
    absl::StatusOr<Topology> t = ParseTopology(yaml, "t.yaml");
    REQUIRE(t.ok());
    return t;
  };
  absl::StatusOr<Topology> t = topology("", "");
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->n_groups() == 4);
  // Decoding: layer l on group l mod 4; prefill: expert e on worker e mod 8.
  for (int layer = 0; layer < c.n_layer; ++layer) CHECK(t->GroupOfLayer(layer) == layer % 4);
  CHECK(t->GroupMembers(3) == std::vector<int>{6, 7});
  for (int e = 0; e < c.n_expert; ++e) CHECK(t->PrefillWorkerOfExpert(e) == e);

  // Any group size that makes whole groups: 2 groups of 4 (workers 4..7 of
  // group 1, each computing position i of 2 or nothing), 8 groups of 1 (one
  // worker computes both experts of its layers).
  t = topology("  group_size: 4\n", "");
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->n_groups() == 2);
  CHECK(t->GroupMembers(1) == std::vector<int>{4, 5, 6, 7});
  CHECK(t->GroupOfLayer(5) == 1);
  t = topology("  group_size: 1\n", "");
  REQUIRE(ValidateTopologyWithModel(*t).ok());
  CHECK(t->n_groups() == 8);
  CHECK(t->GroupMembers(6) == std::vector<int>{6});

  // A budget of exactly one expert is enough; one byte less is not.
  const std::string exact = std::to_string(c.expert_bytes_max);
  t = topology("", ", memory_budget: " + exact);
  CHECK(ValidateTopologyWithModel(*t).ok());
  t = topology("", ", memory_budget: " + std::to_string(c.expert_bytes_max - 1));
  const absl::Status small = ValidateTopologyWithModel(*t);
  CHECK(small.message().find("t.yaml: workers.nodes[0].memory_budget: ") == 0);
  CHECK(small.message().find("at least " + exact + " bytes") != absl::string_view::npos);
}

}  // namespace odmoe

namespace odmoe {

TEST_CASE("topology: draft_tokens must fit a batch and the limit", "[topology]") {
  auto with = [](const std::string& shadow_extra) {
    return ParseTopology("model: " + Model() +
                             "\nmain: { id: m, address: \"127.0.0.1:1\", batch: 8 }\n"
                             "shadow: { id: s, address: \"127.0.0.1:2\", " +
                             shadow_extra +
                             " }\nworkers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:3\" }\n",
                         "t.yaml");
  };
  CHECK(with("draft_tokens: 7").ok());
  absl::StatusOr<Topology> t = with("draft_tokens: 8");
  REQUIRE(!t.ok());
  CHECK(t.status().message().find("main.batch is 8") != std::string::npos);
  t = with("draft_tokens: 17");
  REQUIRE(!t.ok());
  CHECK(t.status().message().find("draft_tokens") != std::string::npos);
  t = with("draft_tokens: 2, draft_wait: soon");
  REQUIRE(!t.ok());
  CHECK(t.status().message().find("draft_wait") != std::string::npos);
}

TEST_CASE("topology: lookahead's variants are checked", "[topology]") {
  auto with = [](const std::string& lookahead) {
    return ParseTopology("model: " + Model() + "\nprediction: lookahead\nlookahead: " + lookahead +
                             "\nmain: { id: m, address: \"127.0.0.1:1\" }\n"
                             "workers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:3\" }\n",
                         "t.yaml");
  };
  absl::StatusOr<Topology> t = with("{ layers: 8 }");
  REQUIRE(t.ok());
  CHECK(t->lookahead == LookaheadSpec{8, 0, 0});
  for (const char* bad : {"{ layers: 0 }", "{ layers: 9 }", "{ candidates: -1 }",
                          "{ from_layer: -2 }", "{ depth: 2 }", "3"}) {
    INFO(bad);
    t = with(bad);
    REQUIRE(!t.ok());
    CHECK(t.status().message().find("lookahead") != std::string::npos);
  }
}

TEST_CASE("topology: prefill mini-batches are a count or auto, with the link's costs",
          "[topology][prefill]") {
  auto with = [](const std::string& prefill, const std::string& wire = "{}") {
    return ParseTopology("model: " + Model() + "\nprediction: none\nprefill: " + prefill +
                             "\nwire: " + wire +
                             "\nmain: { id: m, address: \"127.0.0.1:1\" }\n"
                             "workers:\n  nodes:\n    - { id: a, address: \"127.0.0.1:3\" }\n",
                         "t.yaml");
  };
  absl::StatusOr<Topology> t =
      with("{ mini_batch: auto, message_cost: 80us }", "{ link_bandwidth: 100Mbit/s }");
  INFO(t.status());
  REQUIRE(t.ok());
  CHECK(t->prefill_mini_batch == Topology::kAutoMiniBatch);
  CHECK(t->prefill_message_cost_us == 80);
  CHECK(t->link_bandwidth == 12'500'000ull);
  absl::StatusOr<Topology> back = ParseTopology(TopologyToYaml(*t), "t.yaml");
  REQUIRE(back.ok());
  CHECK(back->prefill_mini_batch == Topology::kAutoMiniBatch);
  CHECK(back->prefill_message_cost_us == 80);
  CHECK(back->link_bandwidth == 12'500'000ull);
  t = with("{ mini_batch: 8 }");
  REQUIRE(t.ok());
  CHECK(t->prefill_mini_batch == 8);
  for (const char* bad : {"{ mini_batch: automatic }", "{ mini_batch: 0 }",
                          "{ message_cost: 5 }", "{ message_cost: -1us }"}) {
    INFO(bad);
    t = with(bad);
    REQUIRE(!t.ok());
    CHECK(t.status().message().find("prefill") != std::string::npos);
  }
  t = with("{}", "{ link_bandwidth: fast }");
  REQUIRE(!t.ok());
  CHECK(t.status().message().find("link_bandwidth") != std::string::npos);
}

}  // namespace odmoe
