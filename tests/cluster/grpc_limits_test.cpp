// Limits on the Main gRPC service's anonymous calls (issue 32, findings 4 and
// 8; main_node/main_call_limits.h), written as the attacks: twelve Tokenize
// calls of the largest text at once, an oversized text, the gRPC share of the
// request queue next to HTTP clients, and a 100 KB invalid value that must
// come back as a short INVALID_ARGUMENT (not RESOURCE_EXHAUSTED "Stream
// removed" from trailers too large to send). And finding 5: the HTTP/2 rapid
// reset (CVE-2023-44487) on the main node's and a worker's gRPC port.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/score_client.h"
#include "http2_rapid_reset.h"
#include "httplib.h"
#include "main_node/main_call_limits.h"
#include "process_watch.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// `bytes` of ordinary text (held-out lines, repeated).
std::string TextOf(size_t bytes) {
  std::string line;
  for (const std::string& p : HeldOutPrompts(20)) line += p + "\n";
  std::string text;
  text.reserve(bytes);
  while (text.size() < bytes) text.append(line, 0, std::min(line.size(), bytes - text.size()));
  return text;
}

// A 4-token greedy completion over gRPC, checked against the single process;
// its time in seconds.
double ExpectCompletion(const std::string& address, double bound_seconds) {
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_tokens(4);
  req.set_ignore_eos(true);
  const auto start = Clock::now();
  absl::StatusOr<v1::GenerateStats> r = GenerateOnMain(address, req, nullptr, absl::Seconds(120));
  const double t = SecondsSince(start);
  INFO(r.status().ToString() << "; took " << t << " s");
  REQUIRE(r.ok());
  const std::vector<int32_t> want =
      TinyReference().Generate(TestRequest("Once upon a time", 4)).value().output_ids;
  CHECK(std::vector<int32_t>(r->output_ids().begin(), r->output_ids().end()) == want);
  CHECK(t < bound_seconds);
  return t;
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

ClusterConfig SmallCluster() {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  return cfg;
}

}  // namespace

TEST_CASE("grpc limits: twelve largest Tokenize calls at once stay within the memory budget",
          "[cluster][limits]") {
  auto cluster = TestCluster::Start(SmallCluster());
  REQUIRE(cluster.ok());
  const std::string address = (*cluster)->main_address();
  const std::string text = TextOf(kMaxTokenizeTextBytes);

  // One call of the largest text: what tokenizing it costs.
  absl::StatusOr<RemoteTokens> one;
  const auto start = Clock::now();
  const uint64_t one_growth = PeakRssGrowth([&] { one = TokenizeOnMain(address, text); });
  WARN("one Tokenize of " << text.size() << " bytes: peak RSS growth " << one_growth / kWatchMiB
                          << " MiB, " << SecondsSince(start) << " s");
  REQUIRE(one.ok());
  CHECK(one->ids.size() > text.size() / 8);

  // Twelve at once, with a completion in the middle: what is admitted is
  // tokenized exactly as alone, the rest is refused with the limit named.
  std::atomic<int> done{0}, refused{0};
  std::atomic<bool> wrong{false};
  const uint64_t growth = PeakRssGrowth([&] {
    std::vector<std::thread> callers;
    for (int i = 0; i < 12; ++i) {
      callers.emplace_back([&] {
        absl::StatusOr<RemoteTokens> r = TokenizeOnMain(address, text, absl::Seconds(300));
        if (r.ok()) {
          if (r->ids != one->ids) wrong = true;
          ++done;
        } else if (absl::IsResourceExhausted(r.status()) &&
                   r.status().message().find("tokenized") != std::string::npos) {
          ++refused;
        } else {
          UNSCOPED_INFO("unexpected: " << r.status().ToString());
          wrong = true;
        }
      });
    }
    ExpectCompletion(address, 60);
    for (std::thread& t : callers) t.join();
  });
  WARN("12 Tokenize calls at once: " << done.load() << " tokenized, " << refused.load()
                                     << " refused; peak RSS growth " << growth / kWatchMiB
                                     << " MiB");
  CHECK_FALSE(wrong.load());
  CHECK(done.load() >= 1);
  CHECK(done.load() + refused.load() == 12);
  // The budget: one text's tokenization at a time (measured alone above) and
  // twelve received messages with their copies, well within 1 GiB; without
  // the limits twelve such texts cost twelve times one.
  CHECK(growth < 1024 * kWatchMiB);
  ExpectCompletion(address, 60);

  // One byte more than the limit: a clear error, nothing tokenized.
  absl::StatusOr<RemoteTokens> over = TokenizeOnMain(address, TextOf(kMaxTokenizeTextBytes + 1));
  INFO(over.status().ToString());
  CHECK(absl::IsInvalidArgument(over.status()));
  CHECK(over.status().message().find("exceeds the limit of 4194304 bytes") != std::string::npos);
}

TEST_CASE("grpc limits: gRPC Generate calls keep waiting places for the HTTP API",
          "[cluster][limits]") {
  ClusterConfig cfg = SmallCluster();
  cfg.http = true;
  cfg.max_running = 1;
  cfg.max_queue = 4;  // the gRPC share: 1 + 4 / 2 = 3 places
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const std::string address = c.main_address();
  // Six long gRPC generations at once: three get a place, three are refused
  // at once with the rule named.
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      v1::GenerateRequest req;
      req.set_prompt("Once upon a time");
      req.set_max_tokens(480);  // long: the first three still run when the last arrive
      req.set_ignore_eos(true);
      absl::StatusOr<v1::GenerateStats> r =
          GenerateOnMain(address, req, nullptr, absl::Seconds(300));
      if (r.ok()) {
        ++ok;
      } else if (absl::IsResourceExhausted(r.status()) &&
                 r.status().message().find("main.max_queue / 2") != std::string::npos) {
        ++refused;
      } else {
        UNSCOPED_INFO("unexpected: " << r.status().ToString());
        ++other;
      }
    });
  }
  // While they run (their refusals come at once), an HTTP client gets a
  // place in the queue and its answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  httplib::Client cli("127.0.0.1", c.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(300));
  auto res = cli.Post("/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0})",
                      "application/json");
  for (std::thread& t : callers) t.join();
  REQUIRE(res);
  INFO(res->body);
  CHECK(res->status == 200);
  CHECK(other.load() == 0);
  CHECK(ok.load() + refused.load() == 6);
  CHECK(refused.load() >= 3);
  CHECK(ok.load() >= 3);  // nothing else held a gRPC place
}

TEST_CASE("grpc limits: a 100 KB invalid value comes back as a short INVALID_ARGUMENT",
          "[cluster][limits]") {
  auto cluster = TestCluster::Start(SmallCluster());
  REQUIRE(cluster.ok());
  v1::GenerateRequest req;
  req.set_prompt("Once upon a time");
  req.set_max_tokens(2);
  req.mutable_experiment()->set_prediction(std::string(100000, 'x'));
  absl::StatusOr<v1::GenerateStats> r =
      GenerateOnMain((*cluster)->main_address(), req, nullptr, absl::Seconds(60));
  INFO(r.status().ToString());
  CHECK(absl::IsInvalidArgument(r.status()));
  CHECK(r.status().message().size() < 400);
  CHECK(r.status().message().find("experiment.prediction 'xxxx") != std::string::npos);
  CHECK(r.status().message().find("(100000 bytes)") != std::string::npos);
}

// gRPC 1.51 (Debian's) has no fix for the rapid reset: every HEADERS frame
// becomes a call queued inside it (about 15 KB each) even when RST_STREAM
// follows at once, and none of its channel arguments bounds that. Each node's
// plain-TCP port is therefore guarded (cluster/h2_guard.h): a connection that
// resets streams beyond its budget, or the node's, is closed before the reset
// reaches gRPC. Before the guard, 8 s of this attack took the process to 5.9 GB
// and a 4-token completion took 9 s; the thread cap (ConfigureServerBuilder)
// still bounds the threads. The attack runs 5 s (ODMOE_RAPID_RESET_SECONDS: a
// longer one) from 4 connections, reconnecting whenever the node closes one.
TEST_CASE("grpc limits: HTTP/2 rapid reset on a node's port leaves the node up and bounded",
          "[cluster][limits]") {
  auto cluster = TestCluster::Start(SmallCluster());
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const std::string address = c.main_address();
  ExpectCompletion(address, 60);
  const double normal = ExpectCompletion(address, 60);
  const char* env = std::getenv("ODMOE_RAPID_RESET_SECONDS");
  const double seconds = env != nullptr ? std::strtod(env, nullptr) : 5;
  struct Target {
    const char* name;
    int port;
    const char* path;
  };
  for (const Target& target :
       {Target{"main", PortOf(address), "/odmoe.v1.Main/Generate"},
        Target{"worker", PortOf(c.topology().workers[0].address), "/odmoe.v1.Worker/Experts"}}) {
    INFO(target.name);
    const int threads_before = ThreadCount();
    RapidReset attack({.port = target.port, .path = target.path, .connections = 4});
    const double cpu_before = ProcessCpuSeconds();
    RapidReset::Result r;
    std::vector<double> during;  // completions while the attack runs
    int peak = 0;
    const uint64_t growth = PeakRssGrowth([&] {
      peak = PeakThreads([&] {
        attack.Start();
        const auto start = Clock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        // Normal completions, one after another, while the attack goes on.
        while (SecondsSince(start) < seconds) during.push_back(ExpectCompletion(address, 10));
        r = attack.Stop();
      });
    });
    const double node_cpu = ProcessCpuSeconds() - cpu_before - r.cpu_seconds;
    const auto start = Clock::now();
    const double after = ExpectCompletion(address, 10);
    double slowest = 0;
    for (double t : during) slowest = std::max(slowest, t);
    WARN("rapid reset on the " << target.name << "'s port: " << r.streams << " streams ("
                               << 2 * r.streams << " frames sent, "
                               << static_cast<int>(2 * r.streams / r.seconds) << " frames/s) in "
                               << r.seconds << " s over " << r.connects
                               << " connections; nodes' CPU " << node_cpu << " s; peak RSS growth "
                               << growth / kWatchMiB << " MiB; threads " << threads_before
                               << " -> peak " << peak << "; " << during.size()
                               << " 4-token completions during it, the slowest " << slowest
                               << " s; one after it " << after << " s (answered "
                               << SecondsSince(start) << " s after; " << normal
                               << " s without the attack)");
    CHECK(r.connects > 100);  // the attack did run, and the node closed its connections
    CHECK(during.size() >= 1);
    // Far below the ~1 GB per second of attack that gRPC 1.51 alone queued.
#if defined(__SANITIZE_ADDRESS__)
    // ASan's quarantine (256 MB) keeps what the attack's connections freed:
    // the memory bound is the normal build's to check.
    WARN("ASan build: the RSS bound (< 256 MiB) is not checked");
#else
    CHECK(growth < 256 * kWatchMiB);
#endif
    // Three servers (main, two workers) of at most 64 threads each, and the
    // test's own: without the cap this went into the thousands.
    CHECK(peak < threads_before + 3 * 64);
  }
}

}  // namespace odmoe::test
