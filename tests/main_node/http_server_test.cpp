// The HTTP server on its own (main_node/http_server.h), without a cluster:
// routes, keep-alive, server-made errors, the check before the body, bodies
// bounded while read, streamed responses, the handler-thread limit, a slow
// reader's output cap, and Stop() with a handler still running.
#include "main_node/http_server.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "raw_http_client.h"

namespace odmoe::test {
namespace {

std::string ErrorText(int status, const std::string& message, const std::string& code) {
  return std::to_string(status) + " " + code + ": " + message;
}

HttpServer::Routes EchoRoutes() {
  HttpServer::Routes routes;
  routes.push_back({"GET", "/hello", false, false, [](const HttpRequest& req, HttpResponder& r) {
                      r.Respond(HttpResponse::Json(200, "hello " + req.Header("x-name")));
                    }});
  routes.push_back({"GET", "/items/", true, false, [](const HttpRequest& req, HttpResponder& r) {
                      r.Respond(HttpResponse::Json(200, "item " + req.path_rest));
                    }});
  routes.push_back({"POST", "/echo", false, true, [](const HttpRequest& req, HttpResponder& r) {
                      r.Respond(HttpResponse::Json(200, req.body));
                    }});
  routes.push_back({"GET", "/silent", false, false, [](const HttpRequest&, HttpResponder&) {}});
  routes.push_back({"GET", "/stream", false, true, [](const HttpRequest&, HttpResponder& r) {
                      if (!r.StartStream(200, "text/event-stream", {})) return;
                      for (int i = 0; i < 100; ++i) r.Write("data: " + std::to_string(i) + "\n\n");
                      r.EndStream();
                    }});
  return routes;
}

std::unique_ptr<HttpServer> StartServer(const HttpServerOptions& opt, HttpServer::Routes routes,
                                        HttpServer::BeforeBody before = {}) {
  absl::StatusOr<std::unique_ptr<HttpServer>> s =
      HttpServer::Start(opt, std::move(routes), std::move(before), ErrorText);
  INFO(s.status());
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace

TEST_CASE("http server: routes, keep-alive, server-made errors", "[main_node][http_server][tsan]") {
  auto server = StartServer(HttpServerOptions{}, EchoRoutes());
  RawClient cli(server->port());
  // Two requests on one connection.
  REQUIRE(cli.Send("GET /hello HTTP/1.1\r\nHost: x\r\nX-Name: ann\r\n\r\n"));
  std::string r = cli.ReadResponse(5);
  CHECK(StatusOf(r) == 200);
  CHECK(BodyOf(r) == "hello ann");
  REQUIRE(cli.Send("GET /items/a%2Fb%20c?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  r = cli.ReadResponse(5);
  CHECK(BodyOf(r) == "item a/b c");
  REQUIRE(cli.Send("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"));
  r = cli.ReadResponse(5);
  CHECK(StatusOf(r) == 404);
  CHECK(BodyOf(r) == "404 : No route GET /nowhere");
  REQUIRE(cli.Send("DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(StatusOf(cli.ReadResponse(5)) == 405);
  REQUIRE(cli.Send("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(StatusOf(cli.ReadResponse(5)) == 500);
  REQUIRE(cli.Send("GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  r = cli.ReadUntilClosed(5, &closed);
  CHECK(StatusOf(r) == 200);
  CHECK(r.find("Connection: close") != std::string::npos);
  CHECK(closed);
  // Not HTTP at all: 400, closed.
  RawClient junk(server->port());
  REQUIRE(junk.Send("HELLO THERE\r\n\r\n"));
  r = junk.ReadUntilClosed(5, &closed);
  CHECK(StatusOf(r) == 400);
  CHECK(closed);
}

TEST_CASE("http server: the check before the body, bodies bounded while read",
          "[main_node][http_server][tsan]") {
  HttpServerOptions opt;
  opt.max_body_bytes = 1000;
  auto server = StartServer(opt, EchoRoutes(), [](const HttpRequest& req) {
    std::optional<HttpResponse> refusal;
    if (req.Header("X-Key") != "k") refusal = HttpResponse::Json(401, "no key");
    return refusal;
  });
  const int port = server->port();
  // Refused from the headers: the body (declared, never sent) is not waited for.
  RawClient refused(port);
  REQUIRE(refused.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n"));
  bool closed = false;
  std::string r = refused.ReadUntilClosed(5, &closed);
  CHECK(StatusOf(r) == 401);
  CHECK(closed);
  // Chunked: served within the limit, 413 past it.
  RawClient ok(port);
  REQUIRE(
      ok.Send("POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n"
              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  r = ok.ReadResponse(5);
  CHECK(StatusOf(r) == 200);
  CHECK(BodyOf(r) == "hello world");
  RawClient big(port);
  std::string chunks =
      "POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) chunks += "190\r\n" + std::string(400, 'b') + "\r\n";
  REQUIRE(big.Send(chunks));
  r = big.ReadUntilClosed(5, &closed);
  CHECK(StatusOf(r) == 413);
  CHECK(r.find("request_too_large") != std::string::npos);
  CHECK(closed);
  // A Content-Length over the limit (the check before the body let it pass).
  RawClient declared(port);
  REQUIRE(
      declared.Send("POST /echo HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: 1001\r\n\r\n" +
                    std::string(1001, 'c')));
  CHECK(StatusOf(declared.ReadUntilClosed(5)) == 413);
}

TEST_CASE("http server: streamed responses, a reader that falls behind, busy, Stop",
          "[main_node][http_server][tsan]") {
  HttpServerOptions opt;
  opt.max_handler_threads = 1;
  opt.max_stream_buffer_bytes = 8192;
  opt.socket_send_buffer_bytes = 4096;
  std::atomic<int> writes_accepted{-1};
  std::atomic<bool> saw_gone{false};
  HttpServer::Routes routes = EchoRoutes();
  routes.push_back({"GET", "/flood", false, true, [&](const HttpRequest&, HttpResponder& r) {
                      r.StartStream(200, "text/plain", {});
                      int n = 0;
                      while (n < 100000 && r.Write(std::string(1024, 'f'))) ++n;
                      writes_accepted = n;
                      saw_gone = r.ClientGone();
                    }});
  routes.push_back({"GET", "/wait", false, true, [&](const HttpRequest&, HttpResponder& r) {
                      while (!r.ClientGone()) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(5));
                      }
                      saw_gone = true;
                    }});
  auto server = StartServer(opt, std::move(routes));
  const int port = server->port();
  {
    RawClient cli(port);
    REQUIRE(cli.Send("GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string r = cli.ReadUntilClosed(5);
    CHECK(StatusOf(r) == 200);
    CHECK(r.find("Transfer-Encoding: chunked") != std::string::npos);
    CHECK(r.find("data: 99\n\n") != std::string::npos);
    CHECK(r.find("\r\n0\r\n\r\n") != std::string::npos);
  }
  {
    // Never read: the handler's writes stop being accepted once the kernel's
    // buffers and 8 KiB of queue are full; the handler sees ClientGone().
    RawClient cli(port, /*rcvbuf=*/4096);
    REQUIRE(cli.Send("GET /flood HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (int i = 0; i < 500 && writes_accepted < 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    INFO("writes accepted: " << writes_accepted.load());
    CHECK(writes_accepted >= 0);
    CHECK(writes_accepted < 1000);  // < 1 MiB: kernel buffers + the 8 KiB queue
    CHECK(saw_gone);
  }
  saw_gone = false;
  // One handler thread: while /wait runs, another off-I/O request gets 503.
  RawClient waiting(port);
  REQUIRE(waiting.Send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  RawClient other(port);
  REQUIRE(other.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"));
  const std::string busy = other.ReadResponse(5);
  CHECK(StatusOf(busy) == 503);
  CHECK(busy.find("busy") != std::string::npos);
  // Stop: the running handler sees ClientGone() and Stop returns.
  const auto start = std::chrono::steady_clock::now();
  server->Stop();
  CHECK(saw_gone);
  CHECK(SecondsSince(start) < 5);
}

}  // namespace odmoe::test
