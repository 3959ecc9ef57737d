// The safe default between nodes: a topology with a node on a non-loopback
// address and no node_tls is refused unless it says `insecure: true`; the
// error names the file, the node's address key, the address and both ways out.
#include <catch2/catch.hpp>

#include "test_paths.h"
#include "topology/topology.h"

namespace odmoe {
namespace {

// A loopback cluster; `header` goes before the nodes, `w1` is worker w1's host.
std::string Yaml(const std::string& header, const std::string& main_host = "127.0.0.1",
                 const std::string& shadow_host = "localhost",
                 const std::string& w1_host = "127.0.0.1") {
  return "model: " + test::SourcePath("models/tiny-mixtral-f16.gguf") + "\n" + header +
         "main: { id: main, address: \"" + main_host + ":7700\" }\n" +
         "shadow: { id: shadow, address: \"" + shadow_host + ":7701\" }\n" +
         "workers:\n  nodes:\n"
         "    - { id: w0, address: \"127.0.0.1:7710\" }\n"
         "    - { id: w1, address: \"" +
         w1_host + ":7711\" }\n";
}

std::string Refusal(const std::string& yaml) {
  absl::StatusOr<Topology> t = ParseTopology(yaml, "deploy/lan.yaml");
  INFO(yaml);
  REQUIRE(!t.ok());
  CHECK(absl::IsInvalidArgument(t.status()));
  return std::string(t.status().message());
}

void ExpectAccepted(const std::string& yaml) {
  absl::StatusOr<Topology> t = ParseTopology(yaml, "deploy/lan.yaml");
  INFO(yaml);
  INFO(t.status());
  REQUIRE(t.ok());
  CHECK(ValidateTopologyWithModel(*t).ok());
}

}  // namespace

TEST_CASE("topology: loopback hosts", "[topology][security]") {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "127.255.255.254", "localhost", "LocalHost",
                           "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"}) {
    INFO(host);
    CHECK(IsLoopbackHost(host));
  }
  for (const char* host :
       {"10.0.0.1", "192.168.1.20", "0.0.0.0", "128.0.0.1", "::", "[::]", "fe80::1",
        "::ffff:10.0.0.1", "edge-a", "localhost.example.com", "127.0.0.1.example.com", ""}) {
    INFO(host);
    CHECK(!IsLoopbackHost(host));
  }
}

TEST_CASE("topology: a loopback cluster needs neither node_tls nor insecure",
          "[topology][security]") {
  ExpectAccepted(Yaml(""));
  ExpectAccepted(Yaml("", "[::1]", "127.0.0.2"));
  absl::StatusOr<Topology> t = ParseTopology(Yaml(""), "");
  REQUIRE(t.ok());
  CHECK(!t->insecure);
  CHECK(t->FirstNonLoopbackNode() == nullptr);
}

TEST_CASE("topology: non-loopback nodes without node_tls are refused", "[topology][security]") {
  // Worker, main and shadow: each refusal names that node's address key and the address.
  std::string m = Refusal(Yaml("", "127.0.0.1", "localhost", "10.0.0.11"));
  INFO(m);
  CHECK(m.find("deploy/lan.yaml: workers.nodes[1].address: '10.0.0.11:7711' is not a "
               "loopback address") == 0);
  CHECK(m.find("node_tls: { ca, cert, key }") != std::string::npos);
  CHECK(m.find("`insecure: true`") != std::string::npos);
  m = Refusal(Yaml("", "0.0.0.0"));
  CHECK(m.find("deploy/lan.yaml: main.address: '0.0.0.0:7700'") == 0);
  m = Refusal(Yaml("", "127.0.0.1", "edge-b"));
  CHECK(m.find("deploy/lan.yaml: shadow.address: 'edge-b:7701'") == 0);
  // Said explicitly, false is the default.
  m = Refusal(Yaml("insecure: false\n", "192.168.1.2"));
  CHECK(m.find("main.address") != std::string::npos);
}

TEST_CASE("topology: insecure: true or node_tls accept non-loopback nodes",
          "[topology][security]") {
  ExpectAccepted(Yaml("insecure: true\n", "10.0.0.1", "10.0.0.2", "10.0.0.11"));
  absl::StatusOr<Topology> t = ParseTopology(Yaml("insecure: true\n", "10.0.0.1", "10.0.0.2"), "");
  REQUIRE(t.ok());
  CHECK(t->insecure);
  REQUIRE(t->FirstNonLoopbackNode() != nullptr);
  CHECK(t->FirstNonLoopbackNode()->id == "main");
  // insecure survives TopologyToYaml (odmoe-cluster and odmoe-bench write topologies
  // that the daemons then load).
  const std::string written = TopologyToYaml(*t);
  CHECK(written.find("insecure: true") != std::string::npos);
  absl::StatusOr<Topology> back = ParseTopology(written, "");
  INFO(written);
  REQUIRE(back.ok());
  CHECK(back->insecure);
  // A loopback topology writes no insecure key.
  t = ParseTopology(Yaml(""), "");
  REQUIRE(t.ok());
  CHECK(TopologyToYaml(*t).find("insecure") == std::string::npos);
  // Mutual TLS between nodes (the files are read when a node starts, not here).
  ExpectAccepted(Yaml("node_tls: { ca: ca.pem, cert: node.pem, key: node-key.pem }\n", "10.0.0.1",
                      "10.0.0.2", "10.0.0.11"));
}

TEST_CASE("topology: insecure takes true or false only", "[topology][security]") {
  for (const char* value : {"yes", "1", "\"\"", "[true]", "True"}) {
    INFO(value);
    const std::string m = Refusal(Yaml(std::string("insecure: ") + value + "\n"));
    CHECK(m.find("deploy/lan.yaml: insecure: ") == 0);
    CHECK(m.find("expected true | false") != std::string::npos);
  }
}

}  // namespace odmoe
