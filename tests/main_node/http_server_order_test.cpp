// The HTTP server's connections under clients that pipeline, send stray
// bytes, half-close or hang up while a request runs (issue 32, findings 2
// and 3), handlers that throw, the shared budget for request bodies
// (finding 7), and the connection limits per client and at the total limit
// (finding 8). Every reply is checked against its own request.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "main_node/http_server.h"
#include "raw_http_client.h"

namespace odmoe::test {
namespace {

using namespace std::chrono_literals;

std::string ErrorText(int status, const std::string& message, const std::string& code) {
  return std::to_string(status) + " " + code + ": " + message;
}

std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Routes whose replies name their request: /echo answers its body after
// `delay_ms` (off the I/O threads, watching ClientGone), /hello answers at
// once on the I/O thread, /throw and /throw-stream fail.
struct Fixture {
  std::atomic<int> delay_ms{0};
  std::atomic<int> gone_seen{0};   // /echo handlers that saw ClientGone()
  std::atomic<int> running{0};     // /echo handlers running now
  std::unique_ptr<HttpServer> server;

  explicit Fixture(HttpServerOptions opt = {}) {
    HttpServer::Routes routes;
    routes.push_back({"POST", "/echo", false, true, [this](const HttpRequest& req, HttpResponder& r) {
                        running++;
                        const auto until =
                            std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms);
                        while (std::chrono::steady_clock::now() < until) {
                          if (r.ClientGone()) {
                            gone_seen++;
                            running--;
                            return r.Respond(HttpResponse::Json(499, "gone"));
                          }
                          std::this_thread::sleep_for(2ms);
                        }
                        running--;
                        r.Respond(HttpResponse::Json(200, "echo:" + req.body));
                      }});
    routes.push_back({"GET", "/hello", false, false, [](const HttpRequest& req, HttpResponder& r) {
                        r.Respond(HttpResponse::Json(200, "hello " + req.Header("x-name")));
                      }});
    routes.push_back({"GET", "/throw", false, true, [](const HttpRequest&, HttpResponder&) {
                        throw std::runtime_error("a handler's bug");
                      }});
    routes.push_back({"GET", "/throw-io", false, false, [](const HttpRequest&, HttpResponder&) {
                        throw std::logic_error("a bug on the I/O thread");
                      }});
    routes.push_back({"GET", "/throw-stream", false, true, [](const HttpRequest&, HttpResponder& r) {
                        r.StartStream(200, "text/plain", {});
                        r.Write("partial");
                        throw std::runtime_error("failed mid-stream");
                      }});
    auto s = HttpServer::Start(opt, std::move(routes), {}, ErrorText);
    INFO(s.status());
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  int port() const { return server->port(); }
};

bool WaitFor(const std::function<bool()>& cond, double seconds = 10) {
  const auto start = std::chrono::steady_clock::now();
  while (!cond()) {
    if (SecondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

}  // namespace

TEST_CASE("http server: pipelined requests are answered in order, each with its own reply",
          "[main_node][http_server][tsan]") {
  Fixture f;
  f.delay_ms = 20;
  // Eight small requests in one send, then a 5 KB and a 40 KB one on the
  // same connection (the finding's pattern), on several connections at once.
  auto run = [&](int conn_id, std::atomic<int>* failures) {
    RawClient cli(f.port());
    std::vector<std::string> bodies;
    std::string burst;
    for (int i = 0; i < 8; ++i) {
      bodies.push_back("c" + std::to_string(conn_id) + "-r" + std::to_string(i));
      burst += Post("/echo", bodies.back());
    }
    if (!cli.Send(burst)) return failures->fetch_add(1), void();
    bodies.push_back(std::string(5000, 'a' + conn_id % 26));
    bodies.push_back(std::string(40000, 'A' + conn_id % 26));
    if (!cli.Send(Post("/echo", bodies[8]))) return failures->fetch_add(1), void();
    if (!cli.Send(Post("/echo", bodies[9]))) return failures->fetch_add(1), void();
    for (const std::string& body : bodies) {
      const std::string r = cli.ReadResponse(20);
      if (StatusOf(r) != 200 || BodyOf(r) != "echo:" + body) failures->fetch_add(1);
    }
  };
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) clients.emplace_back(run, c, &failures);
  for (std::thread& t : clients) t.join();
  CHECK(failures == 0);
  // A GET answered on the I/O thread between off-thread ones keeps its place.
  RawClient cli(f.port());
  REQUIRE(cli.Send(Post("/echo", "one") + "GET /hello HTTP/1.1\r\nX-Name: two\r\n\r\n" +
                   Post("/echo", "three")));
  CHECK(BodyOf(cli.ReadResponse(10)) == "echo:one");
  CHECK(BodyOf(cli.ReadResponse(10)) == "hello two");
  CHECK(BodyOf(cli.ReadResponse(10)) == "echo:three");
}

TEST_CASE("http server: bytes after a request while it runs are kept for after it",
          "[main_node][http_server][tsan]") {
  Fixture f;
  f.delay_ms = 100;
  SECTION("a stray CRLF (as some clients send after a POST body)") {
    RawClient cli(f.port());
    REQUIRE(cli.Send(Post("/echo", "first")));
    std::this_thread::sleep_for(10ms);
    REQUIRE(cli.Send("\r\n"));
    const std::string r = cli.ReadResponse(10);
    CHECK(StatusOf(r) == 200);
    CHECK(BodyOf(r) == "echo:first");
    // The connection serves on.
    REQUIRE(cli.Send(Post("/echo", "second")));
    CHECK(BodyOf(cli.ReadResponse(10)) == "echo:second");
  }
  SECTION("a pipelined request split across segments while the first runs") {
    RawClient cli(f.port());
    REQUIRE(cli.Send(Post("/echo", "first")));
    const std::string next = Post("/echo", "second half");
    for (size_t at = 0; at < next.size(); at += 9) {
      std::this_thread::sleep_for(3ms);
      REQUIRE(cli.Send(next.substr(at, 9)));
    }
    CHECK(BodyOf(cli.ReadResponse(10)) == "echo:first");
    CHECK(BodyOf(cli.ReadResponse(10)) == "echo:second half");
  }
  CHECK(f.gone_seen == 0);
}

TEST_CASE("http server: a client that hangs up or half-closes cancels its running request",
          "[main_node][http_server][tsan]") {
  Fixture f;
  f.delay_ms = 60000;
  SECTION("twenty clients that send stray bytes and hang up free their handlers") {
    {
      std::vector<std::unique_ptr<RawClient>> clients;
      for (int i = 0; i < 20; ++i) {
        clients.push_back(std::make_unique<RawClient>(f.port()));
        REQUIRE(clients.back()->Send(Post("/echo", "x")));
      }
      REQUIRE(WaitFor([&] { return f.running == 20; }));
      for (auto& c : clients) REQUIRE(c->Send("\r\n"));
    }  // all hang up
    CHECK(WaitFor([&] { return f.gone_seen == 20; }, 5));
    CHECK(f.running == 0);
  }
  SECTION("a half-close (shutdown of the client's sending side)") {
    RawClient cli(f.port());
    REQUIRE(cli.Send(Post("/echo", "x")));
    REQUIRE(WaitFor([&] { return f.running == 1; }));
    cli.ShutdownWrite();
    CHECK(WaitFor([&] { return f.gone_seen == 1; }, 5));
    // The answer (the handler's 499) still reaches the half-closed client,
    // then the connection ends.
    bool closed = false;
    const std::string r = cli.ReadUntilClosed(5, &closed);
    CHECK(StatusOf(r) == 499);
    CHECK(closed);
  }
}

TEST_CASE("http server: a handler that throws is a 500 for its request, the server goes on",
          "[main_node][http_server][tsan]") {
  Fixture f;
  RawClient cli(f.port());
  REQUIRE(cli.Send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string r = cli.ReadResponse(10);
  CHECK(StatusOf(r) == 500);
  CHECK(r.find("internal_error") != std::string::npos);
  REQUIRE(cli.Send("GET /throw-io HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(StatusOf(cli.ReadResponse(10)) == 500);
  // The same connection serves on.
  REQUIRE(cli.Send("GET /hello HTTP/1.1\r\nX-Name: after\r\n\r\n"));
  CHECK(BodyOf(cli.ReadResponse(10)) == "hello after");
  // Mid-stream: the stream is not ended as if whole; the connection closes.
  RawClient streamed(f.port());
  REQUIRE(streamed.Send("GET /throw-stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  r = streamed.ReadUntilClosed(10, &closed);
  CHECK(closed);
  CHECK(r.find("\r\n0\r\n\r\n") == std::string::npos);
  RawClient again(f.port());
  REQUIRE(again.Send("GET /hello HTTP/1.1\r\nX-Name: still\r\n\r\n"));
  CHECK(BodyOf(again.ReadResponse(10)) == "hello still");
}

TEST_CASE("http server: request bodies held at once share one budget",
          "[main_node][http_server][tsan]") {
  HttpServerOptions opt;
  opt.max_body_bytes = 1 << 20;
  opt.max_buffered_body_bytes = 1 << 20;
  Fixture f(opt);
  f.delay_ms = 500;
  // Two 600 KB bodies announced at once: the second does not fit. (The
  // server says "100 Continue" once a body's bytes are held.)
  RawClient a(f.port()), b(f.port());
  const std::string body(600000, 'x');
  const std::string announce =
      "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ";
  REQUIRE(a.Send(announce + "600000\r\n\r\n"));
  CHECK(a.ReadUntil("HTTP/1.1 100 Continue\r\n\r\n", 10));
  REQUIRE(b.Send(announce + "600000\r\n\r\n"));
  bool closed = false;
  const std::string refused = b.ReadUntilClosed(5, &closed);
  CHECK(StatusOf(refused) == 503);
  CHECK(refused.find("max_buffered_body_bytes") != std::string::npos);
  CHECK(closed);
  // The first is read and answered; its bytes return to the budget once its
  // handler is done (a moment after its answer: retried until then).
  REQUIRE(a.Send(body));
  CHECK(BodyOf(a.ReadResponse(20)) == "echo:" + body);
  std::string again;
  for (int i = 0; i < 100; ++i) {
    RawClient c(f.port());
    REQUIRE(c.Send(Post("/echo", body)));
    again = c.ReadResponse(20);
    if (StatusOf(again) != 503) break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(BodyOf(again) == "echo:" + body);
  // Chunked bodies count as they grow.
  // (d holds 900 KB once the bytes of c, answered just now, are given back.)
  std::unique_ptr<RawClient> d;
  bool held = false;
  for (int i = 0; i < 100 && !held; ++i) {
    d = std::make_unique<RawClient>(f.port());
    REQUIRE(d->Send(announce + "900000\r\n\r\n"));
    held = d->ReadUntil("HTTP/1.1 100 Continue\r\n\r\n", 2);
    if (!held) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(held);
  RawClient e(f.port());
  std::string chunked = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) chunked += "10000\r\n" + std::string(0x10000, 'c') + "\r\n";
  REQUIRE(e.Send(chunked));
  CHECK(StatusOf(e.ReadUntilClosed(5)) == 503);
}

TEST_CASE("http server: connections per client, and room made by idle ones at the limit",
          "[main_node][http_server][tsan]") {
  HttpServerOptions opt;
  opt.max_connections = 8;
  opt.max_connections_per_client = 4;
  Fixture f(opt);
  SECTION("one address past its limit gets 503, another is served") {
    std::vector<std::unique_ptr<RawClient>> held;
    for (int i = 0; i < 4; ++i) {
      held.push_back(std::make_unique<RawClient>(f.port(), 0, "127.0.0.2"));
      REQUIRE(held.back()->Send("GET /hello HTTP/1.1\r\n"));  // half a header: busy, not idle
    }
    RawClient extra(f.port(), 0, "127.0.0.2");
    const std::string r = extra.ReadUntilClosed(5);
    CHECK(StatusOf(r) == 503);
    CHECK(r.find("max_connections_per_client") != std::string::npos);
    RawClient other(f.port());
    REQUIRE(other.Send("GET /hello HTTP/1.1\r\nX-Name: other\r\n\r\n"));
    CHECK(BodyOf(other.ReadResponse(5)) == "hello other");
  }
  SECTION("at the total limit the longest-idle connection makes room") {
    std::vector<std::unique_ptr<RawClient>> idle;
    const char* from[] = {"127.0.0.3", "127.0.0.4"};
    for (int i = 0; i < 8; ++i) {
      idle.push_back(std::make_unique<RawClient>(f.port(), 0, from[i % 2]));
      std::this_thread::sleep_for(5ms);
    }
    REQUIRE(WaitFor([&] { return f.server->connections() == 8; }));
    RawClient late(f.port());
    REQUIRE(late.Send("GET /hello HTTP/1.1\r\nX-Name: late\r\n\r\n"));
    CHECK(BodyOf(late.ReadResponse(5)) == "hello late");
    // An idle connection (the longest idle) was closed for it.
    CHECK(ClosedCount(idle, 0.2) == 1);
  }
}

}  // namespace odmoe::test
