// The HTTP/1.1 request and response as the main node's server and its
// handlers see them (http_connection.h parses requests into HttpRequest;
// http_server.h writes HttpResponse).
//
//   HttpRequest req;   // filled by the connection: method, target, headers, body
//   if (req.Header("authorization").empty()) { ... }
//   HttpResponse r = HttpResponse::Json(200, R"({"ok":true})");
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace odmoe {

/// A request as handlers see it. `body` is empty in the server's
/// `before_body` check (the body is not read yet).
struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // as sent: path and query
  std::string path;                                          // target without the query, %XX decoded
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
  std::string body;
  std::string peer;       // "address:port" of the client
  std::string path_rest;  // for a prefix route: what follows the prefix
  uint64_t id = 0;        // the server's number for the request (in its logs)
  /// The first header of that name (case-insensitive), or "".
  std::string Header(const std::string& name) const;
  bool HasHeader(const std::string& name) const;
};

/// A whole response. `close` ends the connection after it (a refusal whose
/// request body is left unread); the server adds Content-Length and
/// Connection headers.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;
  static HttpResponse Json(int status, std::string body, bool close = false);
};

}  // namespace odmoe
