#include "main_node/http_api_limits.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <array>
#include <cstdlib>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace odmoe {
namespace {

// The numeric host and port of a socket address, as httplib writes them into
// Request::remote_addr / local_addr.
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  std::array<char, NI_MAXHOST> text{};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, text.data(),
                  static_cast<socklen_t>(text.size()), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = text.data();
  return true;
}

bool IsBodyMethod(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" ||
         method == "PRI";
}

bool TakesBody(const httplib::Request& req) {
  return req.method == "POST" &&
         (req.path == "/v1/completions" || req.path == "/v1/chat/completions");
}

bool NeedsApiKey(const std::string& path) {
  return absl::StartsWith(path, "/v1/") || path == "/metrics";
}

}  // namespace

std::string OpenAiErrorBody(const std::string& message, const std::string& type,
                            const std::string& param, const std::string& code) {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return nlohmann::json{{"error", e}}.dump();
}

void RespondAndClose(httplib::Response& res, int status, const std::string& json_body) {
  res.status = status;
  res.set_header("Connection", "close");
  // A provider that writes the whole body and then reports failure: the
  // server sends the response, then ends the connection instead of reading
  // the rest of the refused body as the next request.
  auto body = std::make_shared<std::string>(json_body);
  res.set_content_provider(body->size(), "application/json",
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, length);
                             return false;
                           });
}

bool IsClosingResponse(const httplib::Response& res) {
  return res.get_header_value("Connection") == "close";
}

bool HasApiKey(const HttpGuard& guard, const httplib::Request& req) {
  return guard.api_key.empty() ||
         req.get_header_value("Authorization") == "Bearer " + guard.api_key;
}

httplib::Server::HandlerResponse GuardBeforeBody(const HttpGuard& guard,
                                                 const httplib::Request& req,
                                                 httplib::Response& res) {
  using HR = httplib::Server::HandlerResponse;
  if (!IsBodyMethod(req.method)) return HR::Unhandled;
  auto refuse = [&](int status, const std::string& message, const std::string& type,
                    const std::string& code = "") {
    if (guard.on_refused) guard.on_refused(status);
    RespondAndClose(res, status, OpenAiErrorBody(message, type, "", code));
    return HR::Handled;
  };
  if (NeedsApiKey(req.path) && !HasApiKey(guard, req)) {
    return refuse(401, "Incorrect or missing API key (Authorization: Bearer <key>)",
                  "invalid_request_error", "invalid_api_key");
  }
  if (!TakesBody(req)) {
    const bool known = req.path == "/v1/completions" || req.path == "/v1/chat/completions" ||
                       req.path == "/health" || req.path == "/metrics" ||
                       absl::StartsWith(req.path, "/v1/models");
    if (known) {
      return refuse(405, "Method " + req.method + " is not allowed on " + req.path,
                    "invalid_request_error");
    }
    return refuse(404, "No route " + req.method + " " + req.path, "invalid_request_error");
  }
  const std::string limit = absl::StrCat(guard.max_body_bytes, " bytes (main.max_body_bytes)");
  const bool chunked = absl::EqualsIgnoreCase(req.get_header_value("Transfer-Encoding"), "chunked");
  if (!chunked) {
    if (!req.has_header("Content-Length")) {
      return refuse(411, "The request body needs a Content-Length or chunked transfer encoding",
                    "invalid_request_error");
    }
    uint64_t length = 0;
    if (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) {
      return refuse(400, "Content-Length is not a number", "invalid_request_error");
    }
    if (length > guard.max_body_bytes) {
      return refuse(
          413, absl::StrCat("The request body of ", length, " bytes exceeds the limit of ", limit),
          "invalid_request_error", "request_too_large");
    }
  }
  if (absl::StartsWithIgnoreCase(req.get_header_value("Content-Type"), "multipart/")) {
    return refuse(415, "Multipart bodies are not accepted; send the request as JSON",
                  "invalid_request_error");
  }
  return HR::Unhandled;
}

bool ReadBodyWithin(size_t max_bytes, const httplib::ContentReader& reader, std::string* body,
                    httplib::Response& res) {
  body->clear();
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (n > max_bytes - body->size()) {
      too_large = true;
      return false;  // stop reading: the rest stays on the wire
    }
    body->append(data, n);
    return true;
  });
  if (too_large) {
    body->clear();
    body->shrink_to_fit();
    RespondAndClose(res, 413,
                    OpenAiErrorBody(absl::StrCat("The request body exceeds the limit of ",
                                                 max_bytes, " bytes (main.max_body_bytes)"),
                                    "invalid_request_error", "", "request_too_large"));
    return false;
  }
  if (!read) {
    RespondAndClose(res, 400,
                    OpenAiErrorBody("The request body could not be read (bad chunked framing or "
                                    "an unsupported Content-Encoding?)",
                                    "invalid_request_error"));
    return false;
  }
  return true;
}

std::optional<ClientConnection> ClientConnection::Find(const httplib::Request& req) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
  if (!dir) return std::nullopt;
  while (const dirent* entry = readdir(dir.get())) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir.get())) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
      continue;  // not a connected socket
    }
    std::string local_host, peer_host;
    int local_port = 0, peer_port = 0;
    if (HostAndPort(local, local_len, &local_host, &local_port) &&
        HostAndPort(peer, peer_len, &peer_host, &peer_port) && local_port == req.local_port &&
        peer_port == req.remote_port && local_host == req.local_addr &&
        peer_host == req.remote_addr) {
      return ClientConnection(fd);
    }
  }
  return std::nullopt;
}

bool ClientConnection::Gone() const {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) < 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char byte;
    return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace odmoe
