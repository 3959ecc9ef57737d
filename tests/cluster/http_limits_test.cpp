// The limits a client reaches before any work (issue 18), with real nodes:
// HTTP bodies bounded while they are read, chunked or not (peak memory
// measured in this process, which hosts the main node), the API key checked
// from the headers before a body is read, any content type taken as JSON
// (curl -d), gRPC messages bounded per call, Node.Trace capacity bounded; and
// /health and completions that tell the truth when the cluster is degraded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/node_server.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process_watch.h"
#include "test_cluster.h"
#include "util/process_memory.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMiB = 1u << 20;


struct RawExchange {
  int status = 0;       // 0: no response
  std::string headers;  // the response's status line and headers
  std::string body;
  uint64_t body_bytes_sent = 0;  // of the request body, before the server stopped us
};

// One request over a plain socket: `head` (request line and headers, ending
// in a blank line), then `body_bytes` bytes of 'x' as chunks of 64 KiB when
// `chunked`, or raw. The response is read while the body is being sent, as a
// client that sees an early answer would; sending stops at the response or
// when the server closes the connection.
RawExchange Exchange(int port, const std::string& head, uint64_t body_bytes, bool chunked) {
  RawExchange out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{15, 0};  // a server that never answers fails the test, it does not hang it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  std::atomic<bool> answered{false};
  std::thread reader([&] {
    std::string got;
    char buf[16384];
    size_t body_at = std::string::npos;
    uint64_t length = 0;
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (body_at == std::string::npos && (body_at = got.find("\r\n\r\n")) != std::string::npos) {
        body_at += 4;
        const size_t cl = got.find("Content-Length: ");
        if (cl != std::string::npos && cl < body_at) {
          absl::SimpleAtoi(got.substr(cl + 16, got.find("\r\n", cl) - cl - 16), &length);
        }
      }
      if (body_at != std::string::npos && got.size() >= body_at + length) break;
    }
    if (body_at != std::string::npos) {
      out.headers = got.substr(0, body_at);
      out.body = got.substr(body_at);
      absl::SimpleAtoi(got.substr(9, 3), &out.status);
    }
    answered = true;
  });
  bool ok = send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size());
  const std::string piece(64u << 10, 'x');
  const std::string framed = chunked ? "10000\r\n" + piece + "\r\n" : piece;
  while (ok && !answered.load() && out.body_bytes_sent < body_bytes) {
    ok =
        send(fd, framed.data(), framed.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(framed.size());
    if (ok) out.body_bytes_sent += piece.size();
  }
  if (ok && chunked && !answered.load()) send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
  reader.join();
  close(fd);
  return out;
}

std::string Head(const std::string& path, const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra + "\r\n";
}

void ExpectOpenAiError(const std::string& body, const std::string& code) {
  INFO(body);
  const json j = json::parse(body, nullptr, false);
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(j["error"]["type"].is_string());
  if (!code.empty()) CHECK(j["error"]["code"] == code);
}

}  // namespace

TEST_CASE("http limits: a chunked body past the limit is refused within the limit's memory",
          "[cluster][http][limits]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  cfg.max_body_bytes = 1 * kMiB;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const int port = (*cluster)->main().http_port();
  const uint64_t body = 64 * kMiB;
  RawExchange r;
  const uint64_t growth = PeakRssGrowth([&] {
    r = Exchange(port, Head("/v1/completions", "Transfer-Encoding: chunked\r\n"), body, true);
  });
  INFO("peak RSS growth " << growth << " bytes; body bytes sent " << r.body_bytes_sent);
  CHECK(r.status == 413);
  ExpectOpenAiError(r.body, "request_too_large");
  CHECK(r.headers.find("Connection: close") != std::string::npos);
  // The server read about 1 MiB of the 64 MiB: memory grew by far less than
  // the body, and the client could not push the body through.
  CHECK(growth < 16 * kMiB);
  CHECK(r.body_bytes_sent < body / 2);
  // A declared Content-Length over the limit is refused from the headers.
  r = Exchange(port, Head("/v1/completions", "Content-Length: 104857600\r\n"), 0, false);
  CHECK(r.status == 413);
  ExpectOpenAiError(r.body, "request_too_large");
  // Neither Content-Length nor chunked: refused rather than read to the end.
  r = Exchange(port, Head("/v1/completions", ""), 0, false);
  CHECK(r.status == 411);
  // A body for a route that takes none is not read either.
  r = Exchange(port, Head("/v1/embeddings", "Transfer-Encoding: chunked\r\n"), body, true);
  CHECK(r.status == 404);
  CHECK(r.body_bytes_sent < body / 2);
  // A body within the limit, chunked, is served.
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(std::chrono::seconds(60));
  auto res = cli.Post(
      "/v1/completions",
      [](size_t, httplib::DataSink& sink) {
        const std::string b = R"({"prompt": "Once upon a time", "max_tokens": 3})";
        sink.write(b.data(), b.size());
        sink.done();
        return true;
      },
      "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("http limits: without the API key a body is refused before it is read",
          "[cluster][http][limits]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  cfg.api_key = "sesame";
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  const int port = (*cluster)->main().http_port();
  const uint64_t body = 64 * kMiB;  // far over 8 MiB of the default limit, too
  RawExchange r;
  const uint64_t growth = PeakRssGrowth([&] {
    r = Exchange(port, Head("/v1/completions", "Transfer-Encoding: chunked\r\n"), body, true);
  });
  INFO("peak RSS growth " << growth << " bytes; body bytes sent " << r.body_bytes_sent);
  CHECK(r.status == 401);
  ExpectOpenAiError(r.body, "invalid_api_key");
  CHECK(r.body_bytes_sent < body / 2);
  CHECK(growth < 16 * kMiB);
  // The same with a Content-Length body, and for an unknown route.
  r = Exchange(port, Head("/v1/completions", "Content-Length: 67108864\r\n"), body, false);
  CHECK(r.status == 401);
  CHECK(r.body_bytes_sent < body / 2);
  r = Exchange(port, Head("/v1/embeddings", "Content-Length: 67108864\r\n"), body, false);
  CHECK(r.status == 401);
  // With the key, the request is served.
  const std::string ok_body = R"({"prompt": "Once", "max_tokens": 2})";
  r = Exchange(port,
               Head("/v1/completions", "Authorization: Bearer sesame\r\nContent-Length: " +
                                           std::to_string(ok_body.size()) + "\r\n") +
                   ok_body,
               0, false);
  CHECK(r.status == 200);
}

TEST_CASE("http limits: curl -d's form content type carries JSON past 8 KB",
          "[cluster][http][limits]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli("127.0.0.1", (*cluster)->main().http_port());
  cli.set_read_timeout(std::chrono::seconds(60));
  // 9 KB of JSON (a long `user`, which the server accepts and does not use),
  // sent as curl -d sends it.
  const std::string body = json{
      {"prompt", "Once upon a time"},
      {"max_tokens", 4},
      {"temperature", 0},
      {"user",
       std::string(9000, 'u')}}.dump();
  REQUIRE(body.size() > 9000);
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "application/json"}) {
    INFO(type);
    auto res = cli.Post("/v1/completions", body, type);
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == 200);
    CHECK(!json::parse(res->body)["choices"][0]["text"].get<std::string>().empty());
  }
  // A prompt that cannot fit the context is refused before it is tokenized.
  auto res = cli.Post("/v1/completions", json{{"prompt", std::string(4u << 20, 'a')}}.dump(),
                      "application/x-www-form-urlencoded");
  REQUIRE(res);
  CHECK(res->status == 400);
  ExpectOpenAiError(res->body, "context_length_exceeded");
}

TEST_CASE("grpc limits: Generate messages are bounded, Trace capacity too", "[cluster][limits]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.prediction = PredictionMode::kNone;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  const std::string address = c.main_address();
  auto none = [](int32_t, std::string_view) {};
  // 20 MB: over what any Main call needs, refused by gRPC before parsing.
  v1::GenerateRequest req;
  req.set_prompt(std::string(20u << 20, 'a'));
  req.set_max_tokens(2);
  absl::StatusOr<v1::GenerateStats> r = GenerateOnMain(address, req, none, absl::Seconds(60));
  INFO(r.status().ToString());
  CHECK(absl::IsResourceExhausted(r.status()));
  // 2 MB: within the message limit (Tokenize takes 16 MiB texts) but longer
  // than the context could hold: refused before tokenization.
  req.set_prompt(std::string(2u << 20, 'a'));
  uint64_t growth =
      PeakRssGrowth([&] { r = GenerateOnMain(address, req, none, absl::Seconds(60)); });
  INFO(r.status().ToString() << "; peak RSS growth " << growth);
  CHECK(absl::IsOutOfRange(r.status()));
  CHECK(growth < 64 * kMiB);
  CHECK(c.main().max_receive_message_bytes() < 32 * kMiB);
  // The node still serves.
  req.set_prompt("Once upon a time");
  CHECK(GenerateOnMain(address, req, none, absl::Seconds(60)).ok());

  // Node.Trace: a capacity past the documented maximum is refused.
  auto stub = v1::Node::NewStub(MakeChannel(address));
  auto op = TestAuth(c.topology(), PeerRole::kOperator, "operator");
  auto trace = [&](v1::TraceRequest::Action action, uint32_t capacity) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    AttachCredential(ctx, op.get());
    v1::TraceRequest t;
    t.set_action(action);
    t.set_capacity(capacity);
    v1::TraceReply reply;
    return stub->Trace(&ctx, t, &reply);
  };
  grpc::Status s = trace(v1::TraceRequest::START, 0xffffffffu);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("exceeds the maximum of 1000000") != std::string::npos);
  CHECK(trace(v1::TraceRequest::START, kMaxTraceSpans).ok());
  CHECK(trace(v1::TraceRequest::STOP, 0).ok());

  // Between nodes: a worker takes a task of at most a prefill mini-batch of
  // hidden rows (16 x n_embd floats here, plus 1 MiB), the shadow a KV chunk.
  CHECK(c.worker(0).max_receive_message_bytes() < 4 * kMiB);
  CHECK(c.shadow() == nullptr);  // prediction none: no shadow in this cluster
  auto worker = v1::Worker::NewStub(MakeChannel(c.topology().workers[0].address));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(20)));
  AttachCredential(ctx, TestAuth(c.topology(), PeerRole::kMain, "main").get());
  auto stream = worker->Experts(&ctx);
  v1::WorkerRequest task;
  v1::Rows* rows = task.mutable_task()->mutable_input();
  rows->set_rows(4096);
  rows->set_cols(1024);
  rows->set_data(std::string(16u << 20, '\0'));
  stream->Write(task);
  stream->WritesDone();
  v1::ExpertResult result;
  while (stream->Read(&result)) {
  }
  const grpc::Status refused = stream->Finish();
  INFO(refused.error_message());
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  // (Foreign Experts streams: stream_ownership_test.cpp.)
}

TEST_CASE("health: 503 degraded when prediction fell back to none", "[cluster][http][health]") {
  ClusterConfig cfg;
  cfg.workers = 2;
  cfg.http = true;  // prediction: shadow
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  httplib::Client cli("127.0.0.1", c.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(60));
  auto res = cli.Get("/health");
  REQUIRE(res);
  CHECK(res->status == 200);
  // The shadow's gRPC port takes a KV chunk or a prompt, not 256 MiB.
  REQUIRE(c.shadow() != nullptr);
  CHECK(c.shadow()->max_receive_message_bytes() < 32 * kMiB);
  c.KillShadow();
  // The main node notices the broken stream (at once, or at the next request).
  auto completion =
      cli.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 3})", "application/json");
  REQUIRE(completion);
  CHECK(completion->status == 200);  // it still serves, without prediction
  for (int i = 0; i < 500; ++i) {
    res = cli.Get("/health");
    if (res && res->status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(res);
  INFO(res->body);
  CHECK(res->status == 503);
  json j = json::parse(res->body);
  CHECK(j["status"] == "degraded");
  CHECK(j["reason"].get<std::string>().find("prediction fell back to none") != std::string::npos);
  v1::NodeStatus status;
  c.main().FillStatus(&status);
  for (const auto& e : status.entries()) {
    if (e.key() == "health") CHECK(e.value().find("degraded: ") == 0);
    if (e.key() == "serving") CHECK(e.value() == "yes");
  }
  // Back to ok once the shadow is back.
  REQUIRE(c.RestartShadow().ok());
  for (int i = 0; i < 1000; ++i) {
    res = cli.Get("/health");
    if (res && res->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("health: 503 and completions 503 when no group is left", "[cluster][http][health]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.group_size = 2;
  cfg.prediction = PredictionMode::kNone;
  cfg.http = true;
  cfg.wire_delay_us = 3000;  // slow tokens: the worker dies mid-generation
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  TestCluster& c = **cluster;
  REQUIRE(c.main().SetActiveWorkers(2).ok());  // one group left
  httplib::Client cli("127.0.0.1", c.main().http_port());
  cli.set_read_timeout(std::chrono::seconds(120));
  // A non-streamed completion running when its last group dies answers 503
  // with an OpenAI error body (it used to be 200 with an error body).
  int running_status = 0;
  std::string running_body;
  std::thread client([&] {
    httplib::Client own("127.0.0.1", c.main().http_port());
    own.set_read_timeout(std::chrono::seconds(120));
    auto r = own.Post("/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0})",
                      "application/json");
    if (r) {
      running_status = r->status;
      running_body = r->body;
    }
  });
  std::string metrics;
  for (int i = 0; i < 2000; ++i) {
    metrics = c.main().RenderMetrics();
    if (metrics.find("odmoe_requests_running 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(metrics.find("odmoe_requests_running 1") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few tokens out
  c.KillWorker(0);
  client.join();
  INFO(running_body);
  CHECK(running_status == 503);
  ExpectOpenAiError(running_body, "unavailable");
  // Now no group is complete: /health says so, and a new request is 503 before it starts.
  auto res = cli.Get("/health");
  REQUIRE(res);
  CHECK(res->status == 503);
  json j = json::parse(res->body);
  CHECK(j["status"] == "unavailable");
  CHECK(j["reason"].get<std::string>().find("no complete worker group") != std::string::npos);
  for (bool stream : {false, true}) {
    res = cli.Post("/v1/completions",
                   json{{"prompt", "Once"}, {"max_tokens", 3}, {"stream", stream}}.dump(),
                   "application/json");
    REQUIRE(res);
    CHECK(res->status == 503);
    ExpectOpenAiError(res->body, "unavailable");
  }
}

}  // namespace odmoe::test
