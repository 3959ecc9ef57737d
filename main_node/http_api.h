// The main node's OpenAI-compatible HTTP API (next to its gRPC API), for the
// tools users already have. Routes:
//   POST /v1/completions, POST /v1/chat/completions   (stream: true = server-
//        sent events ending in "data: [DONE]"); max_tokens /
//        max_completion_tokens, temperature, top_p, seed, stop,
//        stream_options.include_usage, logprobs / top_logprobs, echo,
//        usage counts
//   GET  /v1/models, GET /v1/models/{id}
//   GET  /health     200 {"status":"ok"} or 503 {"status":..., "reason":...}
//   GET  /metrics    Prometheus text (main_metrics.h and each worker's counters)
// Errors are OpenAI-style bodies: {"error":{"message","type","param","code"}}
// with 400 (bad request), 401 (API key), 404 (unknown model or route),
// 429 (queue full), 503 (cluster not ready). Optional API key
// (Authorization: Bearer) and TLS come from the topology's main section.
// Only http_api.cpp sees the HTTP library.
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
