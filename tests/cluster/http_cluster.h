// An in-process cluster serving the HTTP API, and a client for it, for the
// HTTP tests: `config` with http on (test_cluster.h), a client with a read
// timeout long enough for a sanitizer build.
//
//   std::unique_ptr<TestCluster> cluster = StartHttpCluster(config);
//   httplib::Client cli = HttpClientOf(*cluster);
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>

#include "httplib.h"
#include "test_cluster.h"

namespace odmoe::test {

inline std::unique_ptr<TestCluster> StartHttpCluster(ClusterConfig config) {
  config.http = true;
  auto cluster = TestCluster::Start(config);
  REQUIRE(cluster.ok());
  return std::move(*cluster);
}

inline httplib::Client HttpClientOf(TestCluster& cluster) {
  httplib::Client cli("127.0.0.1", cluster.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(60));
  return cli;
}

}  // namespace odmoe::test
