#include "main_node/http_api_limits.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace odmoe {
namespace {

bool IsBodyMethod(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" ||
         method == "PRI";
}

bool TakesBody(const HttpRequest& req) {
  return req.method == "POST" &&
         (req.path == "/v1/completions" || req.path == "/v1/chat/completions" ||
          req.path == "/apply-template");
}

bool NeedsApiKey(const std::string& path) {
  return absl::StartsWith(path, "/v1/") || path == "/metrics" || path == "/apply-template";
}

}  // namespace

bool HasApiKey(const HttpGuard& guard, const HttpRequest& req) {
  return guard.api_key.empty() || req.Header("Authorization") == "Bearer " + guard.api_key;
}

std::optional<HttpResponse> GuardBeforeBody(const HttpGuard& guard, const HttpRequest& req) {
  if (!IsBodyMethod(req.method)) return std::nullopt;
  auto refuse = [&](int status, const std::string& message, const std::string& type,
                    const std::string& code = "") {
    if (guard.on_refused) guard.on_refused(status);
    return HttpResponse::Json(status, OpenAiErrorBody(message, type, "", code), /*close=*/true);
  };
  if (NeedsApiKey(req.path) && !HasApiKey(guard, req)) {
    return refuse(401, "Incorrect or missing API key (Authorization: Bearer <key>)",
                  "invalid_request_error", "invalid_api_key");
  }
  if (!TakesBody(req)) {
    const bool known = req.path == "/v1/completions" || req.path == "/v1/chat/completions" ||
                       req.path == "/apply-template" || req.path == "/health" ||
                       req.path == "/metrics" || absl::StartsWith(req.path, "/v1/models");
    if (known) {
      return refuse(405,
                    absl::StrCat("Method ", ClipForMessage(req.method), " is not allowed on ",
                                 ClipForMessage(req.path)),
                    "invalid_request_error");
    }
    return refuse(
        404, absl::StrCat("No route ", ClipForMessage(req.method), " ", ClipForMessage(req.path)),
        "invalid_request_error");
  }
  const std::string limit = absl::StrCat(guard.max_body_bytes, " bytes (main.max_body_bytes)");
  const std::string encoding = req.Header("Transfer-Encoding");
  const bool chunked = absl::EqualsIgnoreCase(encoding, "chunked");
  if (!chunked) {
    if (!encoding.empty()) {
      return refuse(400,
                    absl::StrCat("Transfer-Encoding '", ClipForMessage(encoding),
                                 "' is not supported (only chunked)"),
                    "invalid_request_error");
    }
    if (!req.HasHeader("Content-Length")) {
      return refuse(411, "The request body needs a Content-Length or chunked transfer encoding",
                    "invalid_request_error");
    }
    uint64_t length = 0;
    if (!absl::SimpleAtoi(req.Header("Content-Length"), &length)) {
      return refuse(400, "Content-Length is not a number", "invalid_request_error");
    }
    if (length > guard.max_body_bytes) {
      return refuse(
          413, absl::StrCat("The request body of ", length, " bytes exceeds the limit of ", limit),
          "invalid_request_error", "request_too_large");
    }
  }
  if (absl::StartsWithIgnoreCase(req.Header("Content-Type"), "multipart/")) {
    return refuse(415, "Multipart bodies are not accepted; send the request as JSON",
                  "invalid_request_error");
  }
  return std::nullopt;
}

}  // namespace odmoe
