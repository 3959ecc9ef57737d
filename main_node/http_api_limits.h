// The HTTP API's defences before any work (http_api.cpp uses them): what is
// decided from the request headers alone, before any of a body is read. The
// server (http_server.h) calls GuardBeforeBody with every request's headers;
// a refusal is answered at once and the connection closed, its body unread.
// The server itself bounds the body while it reads it (Content-Length and
// chunked alike: 413), and the header's size and read time.
//
//   HttpGuard guard{.max_body_bytes = 8 << 20, .api_key = key};
//   HttpServer::Start(options, routes, [&guard](const HttpRequest& req) {
//     return GuardBeforeBody(guard, req);   // nullopt: go on and read the body
//   });
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "main_node/http_reply.h"  // OpenAiErrorBody
#include "main_node/http_server.h"

namespace odmoe {

struct HttpGuard {
  size_t max_body_bytes = 8u << 20;  // main.max_body_bytes
  std::string api_key;               // main.api_key; empty = none
  /// Called with the reason of every refusal (counts the request).
  std::function<void(int http_status)> on_refused;
};

/// Whether the request carries the API key (always true without one).
bool HasApiKey(const HttpGuard& guard, const HttpRequest& req);

/// The check before the body, from the headers only. For a request with a
/// body (POST, PUT, PATCH, DELETE): 401 without the API key (on /v1/*,
/// /apply-template and /metrics), 404 / 405 for a route that takes no body, 411 without
/// Content-Length or chunked framing, 400 for a Content-Length that is not a
/// number, 413 for one over the limit, 415 for multipart bodies (JSON is
/// expected). A refusal closes the connection. nullopt = not refused.
std::optional<HttpResponse> GuardBeforeBody(const HttpGuard& guard, const HttpRequest& req);

}  // namespace odmoe
