// The shadow's start-up: its quantized copy is prepared in the background by
// Start(), with the progress in Node.Status ("quantizing 37 %"); handshakes
// are refused with UNAVAILABLE until the copy is loaded, so the main node
// retries instead of following a shadow that has no model yet; a shutdown
// during the quantization cancels it and caches nothing.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "cluster/grpc_util.h"
#include "cluster/protocol.h"
#include "shadow_node/shadow_node.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

// ODMOE_CACHE_DIR (where the shadow caches its copy) pointed at a fresh directory.
class FreshTmpDir {
 public:
  FreshTmpDir()
      : dir_(std::filesystem::temp_directory_path() /
             ("odmoe_shadow_start_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const char* old = std::getenv("ODMOE_CACHE_DIR");
    if (old != nullptr) old_ = old;
    setenv("ODMOE_CACHE_DIR", dir_.c_str(), 1);
  }
  ~FreshTmpDir() {
    if (old_.empty()) {
      unsetenv("ODMOE_CACHE_DIR");
    } else {
      setenv("ODMOE_CACHE_DIR", old_.c_str(), 1);
    }
    std::filesystem::remove_all(dir_);
  }
  size_t files() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.is_regular_file();
    return n;
  }

 private:
  std::filesystem::path dir_;
  std::string old_;
};

Topology ShadowTopology() {
  ClusterConfig cfg;
  cfg.workers = 2;
  return MakeTopology(cfg);
}

TEST_CASE("shadow start: quantization progress is reported, and cancel leaves no file",
          "[cluster]") {
  FreshTmpDir tmp;
  const Topology t = ShadowTopology();
  const uint64_t fingerprint = ModelFile::Open(t.model).value()->fingerprint();
  std::vector<double> seen;
  auto path = PrepareShadowModel(t, fingerprint, [&](double f) { seen.push_back(f); });
  REQUIRE(path.ok());
  REQUIRE(!seen.empty());
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  CHECK(seen.back() == 1.0);
  CHECK(tmp.files() == 1);  // the cached copy
  std::filesystem::remove(*path);

  std::atomic<bool> cancel{true};
  auto cancelled = PrepareShadowModel(t, fingerprint, {}, &cancel);
  CHECK(cancelled.status().code() == absl::StatusCode::kCancelled);
  CHECK(tmp.files() == 0);  // neither a cached copy nor a partial file
}

TEST_CASE("shadow start: handshakes wait until the quantized copy is loaded", "[cluster][tsan]") {
  FreshTmpDir tmp;
  const Topology t = ShadowTopology();
  auto shadow = ShadowNode::Create(t, "shadow");
  REQUIRE(shadow.ok());
  auto server = NodeServer::Start("127.0.0.1:0", **shadow);
  REQUIRE(server.ok());
  auto channel = MakeChannel(absl::StrCat("127.0.0.1:", (*server)->port()));
  v1::Hello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_role(v1::ROLE_MAIN);
  hello.set_node_id("main");
  auto auth = TestAuth(t, PeerRole::kMain, "main");
  // Before Start(): no model yet; the refusal says what the shadow is doing.
  absl::StatusOr<v1::Welcome> early = CallHandshake(*channel, hello, absl::Seconds(5), auth.get());
  CHECK(early.status().code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(early.status().message()).find("starting: ") != std::string::npos);
  CHECK((*shadow)->state() == v1::NODE_STATE_STARTING);

  REQUIRE((*shadow)->Start().ok());
  for (int i = 0; i < 3000 && !(*shadow)->ReadyForPeers().ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE((*shadow)->ReadyForPeers().ok());
  CHECK(CallHandshake(*channel, hello, absl::Seconds(5), auth.get()).ok());
  // Its workers do not exist: it stays starting, now waiting for them.
  CHECK((*shadow)->state() == v1::NODE_STATE_STARTING);
  CHECK((*shadow)->state_detail() == "connecting to the workers");
  (*shadow)->Shutdown();
}

}  // namespace
}  // namespace odmoe::test
