// The HTTP/1.1 connection state machine on its own (main_node/http_connection.h):
// requests split at every byte boundary and pipelined in every order parse
// to the same requests, answered one at a time; bytes that arrive while a
// request is served are kept for after it; the end of the client's stream;
// the limits and bad framing.
#include "main_node/http_connection.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace odmoe::test {
namespace {

using Event = HttpConnection::Event;

struct Seen {
  std::string method, target, body;
  bool operator==(const Seen& o) const {
    return method == o.method && target == o.target && body == o.body;
  }
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << s.method << " " << s.target << " [" << s.body.size() << " bytes]";
}

// Drives a connection the way the server does: every header's body is read
// (limit `body_limit`), every request answered at once. Returns the requests
// in order; `refusals` collects refusal statuses; `ended` whether kEnd came.
struct Driver {
  HttpConnection conn;
  std::vector<Seen> requests;
  std::vector<int> refusals;
  bool ended = false;
  size_t body_limit;

  explicit Driver(HttpConnectionLimits limits = {}, size_t limit = 1 << 20)
      : conn(limits), body_limit(limit) {}

  void Pump() {
    for (;;) {
      const Event ev = conn.Next();
      if (ev == Event::kNeedBytes) return;
      if (ev == Event::kEnd) {
        ended = true;
        return;
      }
      if (ev == Event::kHeader) {
        conn.ReadBody(body_limit);
        continue;
      }
      if (ev == Event::kRefused) {
        refusals.push_back(conn.refusal().status);
        conn.Done();
        continue;
      }
      HttpRequest r = conn.TakeRequest();
      requests.push_back({r.method, r.target, r.body});
      conn.Done();
    }
  }
  void Feed(std::string_view bytes) {
    conn.Feed(bytes);
    Pump();
  }
};

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Chunked(const std::string& path, const std::string& body) {
  std::string out = "POST " + path + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t i = 0; i < body.size(); i += 7) {
    const std::string piece = body.substr(i, 7);
    char size[16];
    snprintf(size, sizeof(size), "%zx", piece.size());
    out += std::string(size) + "\r\n" + piece + "\r\n";
  }
  return out + "0\r\n\r\n";
}

struct Case {
  std::string wire;
  Seen seen;
};

std::vector<Case> Cases() {
  return {
      {"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", {"GET", "/health", ""}},
      {Post("/v1/completions", R"({"prompt":"a"})"), {"POST", "/v1/completions", R"({"prompt":"a"})"}},
      {Chunked("/echo", "chunked body of some length"), {"POST", "/echo", "chunked body of some length"}},
      {"\r\n" + Post("/after-crlf", "x"), {"POST", "/after-crlf", "x"}},
      {"GET /q?a=%ff HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", {"GET", "/q?a=%ff", ""}},
  };
}

}  // namespace

TEST_CASE("http connection: every split of pipelined requests parses to the same requests",
          "[main_node][http_connection]") {
  const std::vector<Case> cases = Cases();
  // Every ordered pair and the whole list, pipelined in one stream.
  std::vector<std::vector<size_t>> orders;
  for (size_t a = 0; a < cases.size(); ++a) {
    for (size_t b = 0; b < cases.size(); ++b) orders.push_back({a, b});
  }
  orders.push_back({0, 1, 2, 3, 4, 2, 1, 0});
  for (const std::vector<size_t>& order : orders) {
    std::string wire;
    std::vector<Seen> expected;
    for (size_t i : order) {
      wire += cases[i].wire;
      expected.push_back(cases[i].seen);
    }
    // One cut anywhere, then two cuts, then a byte at a time.
    for (size_t cut = 0; cut <= wire.size(); ++cut) {
      Driver d;
      d.Feed(std::string_view(wire).substr(0, cut));
      d.Feed(std::string_view(wire).substr(cut));
      INFO("cut at " << cut << " of " << wire.size());
      REQUIRE(d.requests == expected);
      CHECK(d.refusals.empty());
      CHECK_FALSE(d.ended);
    }
    for (size_t step : {1, 2, 3, 13}) {
      Driver d;
      for (size_t at = 0; at < wire.size(); at += step) {
        d.Feed(std::string_view(wire).substr(at, step));
      }
      d.conn.FeedEnd();
      d.Pump();
      INFO("step " << step);
      REQUIRE(d.requests == expected);
      CHECK(d.ended);
    }
  }
}

TEST_CASE("http connection: one request at a time, bytes read meanwhile wait for Done",
          "[main_node][http_connection]") {
  HttpConnectionLimits limits;
  limits.max_pipelined_bytes = 100;
  HttpConnection conn(limits);
  conn.Feed(Post("/first", "1") + "\r\n");  // a stray CRLF after the body
  REQUIRE(conn.Next() == Event::kHeader);
  conn.ReadBody(1000);
  REQUIRE(conn.Next() == Event::kRequest);
  CHECK(conn.TakeRequest().body == "1");
  // Busy: the next request is read but not parsed; nothing more to do.
  const std::string second = Post("/second", std::string(150, 'b'));
  CHECK(conn.WantsBytes());
  conn.Feed(second.substr(0, 90));
  CHECK(conn.Next() == Event::kNeedBytes);
  CHECK(conn.WantsBytes());  // 92 bytes kept, under 100
  conn.Feed(second.substr(90, 20));
  CHECK(conn.Next() == Event::kNeedBytes);
  CHECK_FALSE(conn.WantsBytes());  // over the cap: no reads until Done
  CHECK(conn.state() == HttpConnection::State::kBusy);
  conn.Done();
  CHECK(conn.WantsBytes());
  REQUIRE(conn.Next() == Event::kHeader);
  CHECK(conn.request().target == "/second");
  conn.ReadBody(1000);
  CHECK(conn.Next() == Event::kNeedBytes);
  conn.Feed(second.substr(110));
  REQUIRE(conn.Next() == Event::kRequest);
  CHECK(conn.TakeRequest().body == std::string(150, 'b'));
  conn.Done();
  CHECK(conn.Next() == Event::kNeedBytes);
  CHECK(conn.buffered() == 0);
}

TEST_CASE("http connection: the end of the client's stream", "[main_node][http_connection]") {
  SECTION("while a request is served: client_ended, whole requests read still answered") {
    HttpConnection conn({});
    conn.Feed(Post("/a", "1"));
    REQUIRE(conn.Next() == Event::kHeader);
    conn.ReadBody(100);
    REQUIRE(conn.Next() == Event::kRequest);
    conn.TakeRequest();
    conn.Feed("GET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HT");
    conn.FeedEnd();
    CHECK(conn.client_ended());
    CHECK_FALSE(conn.WantsBytes());
    conn.Done();
    REQUIRE(conn.Next() == Event::kHeader);
    CHECK(conn.request().target == "/b");
    conn.ReadBody(0);
    REQUIRE(conn.Next() == Event::kRequest);
    conn.TakeRequest();
    conn.Done();
    CHECK(conn.Next() == Event::kEnd);  // half of /c: nobody to answer
  }
  SECTION("between requests") {
    HttpConnection conn({});
    conn.FeedEnd();
    CHECK(conn.Next() == Event::kEnd);
  }
  SECTION("in the middle of a body: 400") {
    HttpConnection conn({});
    conn.Feed("POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\n12345");
    REQUIRE(conn.Next() == Event::kHeader);
    conn.ReadBody(100);
    CHECK(conn.Next() == Event::kNeedBytes);
    conn.FeedEnd();
    REQUIRE(conn.Next() == Event::kRefused);
    CHECK(conn.refusal().status == 400);
    CHECK(conn.close_after());
    conn.Done();
    CHECK(conn.Next() == Event::kEnd);
  }
}

TEST_CASE("http connection: limits, refusals and bad framing", "[main_node][http_connection]") {
  HttpConnectionLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_body_bytes = 100;
  SECTION("a header over the limit: 431, then the end") {
    Driver d(limits);
    d.Feed("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'));
    REQUIRE(d.refusals == std::vector<int>{431});
    CHECK(d.ended);
  }
  SECTION("a chunked body over the limit: 413") {
    Driver d(limits, 50);
    d.Feed(Chunked("/a", std::string(60, 'x')));
    REQUIRE(d.refusals == std::vector<int>{413});
    CHECK(d.requests.empty());
  }
  SECTION("a Content-Length over ReadBody's limit: 413 before the body") {
    HttpConnection conn(limits);
    conn.Feed("POST /a HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
    REQUIRE(conn.Next() == Event::kHeader);
    CHECK(conn.body_expected());
    CHECK(conn.content_length() == std::optional<uint64_t>(101));
    conn.ReadBody(1000);  // capped at max_body_bytes
    REQUIRE(conn.Next() == Event::kRefused);
    CHECK(conn.refusal().status == 413);
  }
  SECTION("not HTTP: 400") {
    Driver d(limits);
    d.Feed("HELLO THERE\r\n\r\nGET / HTTP/1.1\r\n\r\n");
    REQUIRE(d.refusals == std::vector<int>{400});
    CHECK(d.requests.empty());
    CHECK(d.ended);
  }
  SECTION("refused from the header with a body unread: the connection ends") {
    HttpConnection conn(limits);
    conn.Feed(Post("/a", "12345") + "GET / HTTP/1.1\r\n\r\n");
    REQUIRE(conn.Next() == Event::kHeader);
    conn.Refuse();
    CHECK(conn.close_after());
    CHECK(conn.Next() == Event::kNeedBytes);
    conn.Done();
    CHECK(conn.Next() == Event::kEnd);
  }
  SECTION("refused from the header without a body: the next request is served") {
    HttpConnection conn(limits);
    conn.Feed("GET /nowhere HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
    REQUIRE(conn.Next() == Event::kHeader);
    conn.Refuse();
    CHECK_FALSE(conn.close_after());
    conn.Done();
    REQUIRE(conn.Next() == Event::kHeader);
    CHECK(conn.request().target == "/b");
  }
  SECTION("Connection: close and HTTP/1.0 end after their response") {
    for (const char* req : {"GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET /x HTTP/1.1\r\n\r\n",
                            "GET / HTTP/1.0\r\n\r\nGET /x HTTP/1.1\r\n\r\n"}) {
      Driver d(limits);
      d.Feed(req);
      CHECK(d.requests.size() == 1);
      CHECK(d.ended);
    }
  }
  SECTION("request smuggling: Content-Length with chunked is refused") {
    Driver d(limits);
    d.Feed("POST /a HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    CHECK(d.requests.empty());
    CHECK(d.refusals == std::vector<int>{400});
  }
}

}  // namespace odmoe::test
