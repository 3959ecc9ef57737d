// An event-driven HTTP/1.1 server (Boost.Beast's parser on Boost.Asio) for
// the main node's OpenAI-compatible API (http_api.cpp), built to stay
// responsive under hostile clients:
//   - a few I/O threads serve every connection; an idle, half-open or slow
//     connection holds a socket and a few KiB, never a thread;
//   - each connection answers its requests one at a time, in order
//     (http_connection.h: exactly one read outstanding; a pipelined request
//     is parsed from the bytes already read once the previous response is
//     written; bytes that arrive while a request runs are kept for after it);
//   - at most `max_connections` connections, `max_connections_per_client`
//     from one address: at the total limit the longest-idle connection makes
//     room, else (and past the per-address limit) a 503 (a JSON body from
//     `error_body`) and close;
//   - deadlines: the request header (from the connection's first byte wait,
//     or from the first byte after a keep-alive idle period), the body, each
//     write, and the keep-alive idle time; the header has a size limit (431);
//   - `before_body` sees every request's headers before any body is read and
//     may refuse it (the response is sent, the connection closed, the body
//     left unread); bodies are bounded while they are read, Content-Length
//     and chunked alike (413), and all connections' bodies together
//     (`max_buffered_body_bytes`: 503);
//   - handlers marked `off_io_thread` run on a thread of their own (at most
//     `max_handler_threads` at once, more get 503); a handler's responses go
//     through an HttpResponder that never blocks: streamed output is queued
//     per connection and drained by the I/O threads, and a queue past
//     `max_stream_buffer_bytes`, a write past `write_timeout`, a client that
//     hangs up or half-closes, or a server that stops make ClientGone() true
//     (the handler cancels its work);
//   - an exception out of a handler (or `before_body`, `error_body`) is a 500
//     for that request, logged with the request's number; the server goes on.
// HTTPS when `tls_cert` / `tls_key` are set (asio::ssl, same PEM files).
//
//   HttpServerOptions opt;  opt.host = "127.0.0.1";  opt.port = 0;
//   HttpServer::Routes routes;
//   routes.push_back({"GET", "/health", false, /*off_io_thread=*/false,
//                     [](const HttpRequest&, HttpResponder& r) {
//                       r.Respond(HttpResponse::Json(200, R"({"status":"ok"})"));
//                     }});
//   routes.push_back({"POST", "/v1/completions", false, /*off_io_thread=*/true,
//                     [](const HttpRequest& req, HttpResponder& r) {
//                       if (!r.StartStream(200, "text/event-stream", {})) return;
//                       while (!r.ClientGone() && r.Write("data: x\n\n")) { /* ... */ }
//                       r.EndStream();
//                     }});
//   absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(opt, routes);
//   (*server)->port();  (*server)->Stop();
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "main_node/http_message.h"

namespace odmoe {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;          // 0: any free port (HttpServer::port() says which)
  std::string tls_cert;  // PEM files; both set = HTTPS
  std::string tls_key;
  int io_threads = 2;
  // Open at once. At the limit a new connection closes the connection that
  // has waited longest for its next request (an idle keep-alive or a client
  // that never sent a byte); with none idle it gets 503 and is closed.
  int max_connections = 512;
  int max_connections_per_client = 128;  // from one address; more get 503 and are closed
  int max_handler_threads = 64;         // off-I/O handlers running at once; more get 503
  size_t max_header_bytes = 16u << 10;  // request line + headers; more: 431
  size_t max_body_bytes = 8u << 20;     // Content-Length or chunked; more: 413
  // Request bodies held at once, every connection's together (announced
  // lengths are taken whole when the header arrives, chunked bodies as they
  // grow; a body is held until its handler returns); more: 503.
  size_t max_buffered_body_bytes = 64u << 20;
  // Bytes of later requests read while a request is served (pipelining); at
  // this many the connection is not read again until the response is sent.
  size_t max_pipelined_bytes = 64u << 10;
  absl::Duration header_timeout = absl::Seconds(10);  // a whole request header
  absl::Duration body_timeout = absl::Seconds(60);    // a whole request body
  absl::Duration idle_timeout = absl::Seconds(60);    // keep-alive between requests
  absl::Duration write_timeout = absl::Seconds(30);   // one write of queued output
  size_t max_stream_buffer_bytes = 4u << 20;          // output queued for a slow reader
  // SO_SNDBUF of each connection (0: the kernel's, which grows to a few MiB
  // on loopback: output a slow reader leaves unread waits there first).
  size_t socket_send_buffer_bytes = 0;
};

/// A handler's side of one exchange; thread-safe, never blocks. Exactly one
/// of Respond or StartStream (then Write..., EndStream); a handler that
/// returns without either gets a 500.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  /// True once the response can no longer reach the client: it hung up, its
  /// output fell too far behind, a deadline passed, or the server stops.
  virtual bool ClientGone() const = 0;
  virtual void Respond(HttpResponse response) = 0;
  /// Sends the status line and headers of a chunked response; false when
  /// the client is gone.
  virtual bool StartStream(int status, const std::string& content_type,
                           std::vector<std::pair<std::string, std::string>> headers) = 0;
  /// Queues `data` as one chunk; false when the client is gone (the data is
  /// dropped). Past max_stream_buffer_bytes of unsent output the connection
  /// is closed and this returns false.
  virtual bool Write(std::string_view data) = 0;
  /// The last chunk; the connection then serves its next request.
  virtual void EndStream() = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpRoute {
  std::string method;
  std::string path;  // exact path, or a prefix when `prefix` (the rest: path_rest)
  bool prefix = false;
  bool off_io_thread = false;  // true for handlers that block (generation, probes)
  HttpHandler handler;
};

class HttpServer {
 public:
  using Routes = std::vector<HttpRoute>;
  /// Called with the headers of every request before its body is read; a
  /// response refuses the request (it is sent and the connection closed).
  using BeforeBody = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  /// The body of a response the server makes itself (404, 405, 413, 431,
  /// 503 ...); `code` is a short machine-readable reason or "".
  using ErrorBody =
      std::function<std::string(int status, const std::string& message, const std::string& code)>;

  /// Binds host:port and serves on options.io_threads threads.
  /// INVALID_ARGUMENT for unusable TLS files, UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           Routes routes,
                                                           BeforeBody before_body = {},
                                                           ErrorBody error_body = {});
  ~HttpServer();
  int port() const;
  /// Connections open now (for tests and logs).
  int connections() const;
  /// Stops accepting, closes every connection (handlers see ClientGone()),
  /// waits for the handlers to return, and stops the I/O threads.
  void Stop();

  struct Impl;  // the server's state (http_server.cpp; its sessions use it)

 private:
  HttpServer() = default;
  std::shared_ptr<Impl> impl_;
};

}  // namespace odmoe
