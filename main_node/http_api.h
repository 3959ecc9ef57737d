// The main node's OpenAI-compatible HTTP API (next to its gRPC API), for the
// tools users already have. Routes:
//   POST /v1/completions, POST /v1/chat/completions   (stream: true = server-
//        sent events ending in "data: [DONE]"); max_tokens /
//        max_completion_tokens, temperature, top_p, seed, stop,
//        stream_options.include_usage, logprobs / top_logprobs, echo,
//        usage counts
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /metrics    Prometheus text: main_metrics.h's counters as they are,
//                    each worker's from a snapshot refreshed every second on
//                    a thread of its own (worker_metrics.h); served on the
//                    I/O thread, never waiting for a worker
//   GET  /health     200 {"status":"ok"}, or 503 {"status":..., "reason":...}
//                    (loading, draining, unavailable: no complete worker group,
//                    degraded: prediction fell back to none, the shadow is gone)
// Every body is valid UTF-8 JSON (http_reply.h, json_reply.h): text that is
// not (a token's piece, an echoed path) carries U+FFFD, chat logprobs keep
// the raw bytes in "bytes". Request bodies are parsed strictly (no duplicate
// keys, nothing after the value: ParseRequestJson), and an error message
// quotes client input capped at 128 bytes (ClipForMessage).
// Errors are OpenAI-style bodies: {"error":{"message","type","param","code"}}
// with 400 (bad request), 401 (API key), 404 (unknown model or route),
// 411 / 413 (body framing / main.max_body_bytes), 429 (queue full), 503
// (cluster cannot serve; a non-streamed request that fails while generating
// too: its response is sent when complete). Bodies are JSON whatever their
// Content-Type; the API key and the body's size are checked from the headers,
// before a body is read, and chunked bodies are counted as they are read
// (http_api_limits.h). Optional API key (Authorization: Bearer) and TLS come
// from the topology's main section; connection limit, deadlines and buffers
// from main.http_limits. The server underneath (http_server.h) serves every
// connection from a few I/O threads; only http_server.cpp sees Boost.
//
//   ODMOE_ASSIGN_OR_RETURN(auto api, HttpApi::Start(main_node));   // listens at main.http
//   api->port();  api->Stop();
#pragma once

#include <memory>

#include "absl/status/statusor.h"

namespace odmoe {

class MainNode;

class HttpApi {
 public:
  /// Binds main.http (port 0: any free port) and serves in the background.
  static absl::StatusOr<std::unique_ptr<HttpApi>> Start(MainNode& node);
  ~HttpApi();
  int port() const;
  /// Stops accepting connections and waits for the server thread.
  void Stop();

 private:
  HttpApi() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace odmoe
