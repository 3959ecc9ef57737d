// /metrics under load (issue 32, finding 6): a scrape used to run on a
// completion handler thread and probe every worker (0.5 s per stopped
// worker), so 40 scrape loops made completions answer 503. Now the workers'
// series are a snapshot refreshed on a thread of its own and a scrape is
// served on the I/O thread: completions among 40 scrape loops all answer 200
// with the right text, and a scrape with a worker that does not answer
// returns at once (its series say odmoe_worker_up 0 within a refresh).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const char* kNormal = R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})";

// A socket listening on `port` that never answers: a gRPC call to it waits
// for its deadline (as to a stopped process), unlike a closed port.
class SilentListener {
 public:
  explicit SilentListener(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ =
        bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd_, 64) == 0;
  }
  ~SilentListener() { close(fd_); }
  bool bound() const { return bound_; }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

std::string CompletionText(httplib::Client& cli, int* status) {
  auto res = cli.Post("/v1/completions", kNormal, "application/json");
  *status = res ? res->status : -1;
  if (!res || res->status != 200) return "";
  return json::parse(res->body)["choices"][0]["text"];
}

TEST_CASE("metrics snapshot: 40 scrape loops do not take completions' slots",
          "[cluster][http][metrics]") {
  ClusterConfig cfg = HttpClusterConfig();
  cfg.max_queue = 4;  // few handler slots: scrapes that took one would show
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const int port = c.main().http_port();
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(std::chrono::seconds(120));
  int status = 0;
  const std::string expected = CompletionText(cli, &status);
  REQUIRE(status == 200);

  std::atomic<bool> stop{false};
  std::atomic<int> scrapes{0}, scrape_failures{0};
  std::vector<std::thread> loops;
  for (int i = 0; i < 40; ++i) {
    loops.emplace_back([&] {
      httplib::Client s("127.0.0.1", port);
      s.set_read_timeout(std::chrono::seconds(30));
      while (!stop.load()) {
        auto r = s.Get("/metrics");
        if (r && r->status == 200 && r->body.find("odmoe_requests_total") != std::string::npos) {
          ++scrapes;
        } else {
          ++scrape_failures;
        }
      }
    });
  }
  int ok = 0;
  std::vector<int> statuses;
  for (int i = 0; i < 10; ++i) {
    const std::string text = CompletionText(cli, &status);
    statuses.push_back(status);
    ok += status == 200 && text == expected;
  }
  stop = true;
  for (std::thread& t : loops) t.join();
  INFO("completion statuses:" << [&] {
    std::string s;
    for (int x : statuses) s += " " + std::to_string(x);
    return s;
  }());
  CHECK(ok == 10);
  CHECK(scrapes.load() > 40);
  CHECK(scrape_failures.load() == 0);
}

TEST_CASE("metrics snapshot: a scrape with a silent worker answers at once",
          "[cluster][http][metrics]") {
  ClusterConfig cfg = HttpClusterConfig();
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  httplib::Client cli("127.0.0.1", c.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(30));
  // Worker w1 stops; a listener that never answers takes its port, so every
  // probe of it waits for its whole deadline.
  const std::string& address = c.topology().workers[1].address;
  int port = 0;
  REQUIRE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  c.KillWorker(1);
  SilentListener silent(port);
  REQUIRE(silent.bound());
  std::string text;
  std::vector<double> seconds;
  for (int i = 0; i < 200; ++i) {
    const auto start = Clock::now();
    auto r = cli.Get("/metrics");
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    REQUIRE(r);
    REQUIRE(r->status == 200);
    text = r->body;
    if (text.find("odmoe_worker_up{worker=\"w1\"} 0") != std::string::npos && i >= 10) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(text);
  // Within a refresh or so the snapshot says w1 is down, with its last counters.
  CHECK(text.find("odmoe_worker_up{worker=\"w1\"} 0") != std::string::npos);
  CHECK(text.find("odmoe_worker_up{worker=\"w0\"} 1") != std::string::npos);
  CHECK(text.find("odmoe_worker_loads_total{worker=\"w1\"}") != std::string::npos);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  INFO("median scrape " << median << " s, slowest " << seconds.back() << " s");
  CHECK(median < 0.3);  // a probe of w1 alone takes 0.5 s
}

}  // namespace
}  // namespace odmoe::test
