// The HTTP API's defences before any work (http_api.cpp uses them): what is
// decided from the request headers alone, a request body read within a limit
// however it is framed, a refusal that closes the connection, and the
// connection's socket, to notice a client that hangs up while its
// non-streamed request is generated.
//
// Debian 12's cpp-httplib (0.11.4) bounds only Content-Length bodies
// (set_payload_max_length): a chunked body, or one framed by neither header,
// is read whole into memory before any handler runs, and the API key could
// only be checked after that. So:
//   - GuardBeforeBody runs as the server's pre-routing handler (headers only):
//     API key, route, framing and a declared Content-Length are checked
//     there; a refusal answers at once and closes the connection, its body
//     unread.
//   - The POST routes take a content reader, and ReadBodyWithin counts bytes
//     as they arrive (chunked or not) and stops past the limit: 413, closed.
//   - Any Content-Type is read the same way (the body must be JSON); the
//     library's 8 KB cap on application/x-www-form-urlencoded (curl -d's
//     default) does not apply to these routes.
//
//   HttpGuard guard{.max_body_bytes = 8 << 20, .api_key = key};
//   server.set_pre_routing_handler([&](const auto& req, auto& res) {
//     return GuardBeforeBody(guard, req, res);
//   });
//   server.Post("/v1/completions", [&](const auto& req, auto& res, const auto& reader) {
//     std::string body;
//     if (!ReadBodyWithin(guard.max_body_bytes, reader, &body, res)) return;
//     ...
//   });
//
// Only http_api*.cpp include the HTTP library.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "httplib.h"

namespace odmoe {

/// An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}
/// (empty param / code are null).
std::string OpenAiErrorBody(const std::string& message, const std::string& type,
                            const std::string& param = "", const std::string& code = "");

/// Answers `status` with `json_body` and closes the connection after it
/// ("Connection: close"; the server stops reading from the socket), for a
/// refusal that leaves the request body unread.
void RespondAndClose(httplib::Response& res, int status, const std::string& json_body);
/// Whether `res` was made by RespondAndClose (the error handler leaves it).
bool IsClosingResponse(const httplib::Response& res);

struct HttpGuard {
  size_t max_body_bytes = 8u << 20;  // main.max_body_bytes
  std::string api_key;               // main.api_key; empty = none
  /// Called with the reason of every refusal (counts the request).
  std::function<void(int http_status)> on_refused;
};

/// Whether the request carries the API key (always true without one).
bool HasApiKey(const HttpGuard& guard, const httplib::Request& req);

/// The pre-routing check, from the headers only. For a request with a body
/// (POST, PUT, PATCH, DELETE): 401 without the API key (on /v1/* and
/// /metrics), 404 / 405 for a route that takes no body, 411 without
/// Content-Length or chunked framing, 400 for a Content-Length that is not a
/// number, 413 for one over the limit, 415 for multipart bodies (JSON is
/// expected). Each refusal closes the connection. Handled = refused.
httplib::Server::HandlerResponse GuardBeforeBody(const HttpGuard& guard,
                                                 const httplib::Request& req,
                                                 httplib::Response& res);

/// Reads the request body through `reader`, keeping at most `max_bytes`: a
/// longer body stops being read at the limit and gets 413 (a body that could
/// not be read, 400), the connection closed. False when `res` is that error.
bool ReadBodyWithin(size_t max_bytes, const httplib::ContentReader& reader, std::string* body,
                    httplib::Response& res);

/// The server side of the request's TCP connection, found by its addresses
/// (the library does not hand handlers the socket), to ask whether the client
/// is still there while its response is being computed.
class ClientConnection {
 public:
  /// nullopt when the socket cannot be found (then nobody is watched).
  static std::optional<ClientConnection> Find(const httplib::Request& req);
  /// True once the client closed or reset its side (as httplib's own
  /// is_writable check sees it): the response would go nowhere.
  bool Gone() const;

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace odmoe
