// Who may make the main node's admin calls (Main.Scale). No gRPC types here:
// main_service.cpp fills an AdminCaller from its grpc::ServerContext, and the
// clients send the key with kAuthorizationMetadata.
//
// The rule, in order (docs/operations.md, "Security"):
//   1. a caller that sends the API key ("authorization: Bearer <main.api_key>",
//      as on the HTTP API) may;
//   2. a caller whose client certificate the transport verified (node_tls:
//      every link is mutual TLS) may;
//   3. with neither an API key nor node_tls configured, a caller on the main
//      node's own machine (a loopback peer or a Unix socket) may;
//   everyone else is refused: UNAUTHENTICATED when a key is configured (and
//   was missing or wrong), PERMISSION_DENIED otherwise.
//
//   AdminCaller caller{.peer = ctx->peer(), .authorization = "Bearer s3cret"};
//   absl::Status s = AuthorizeAdminCall(caller, topology.main.api_key, "Main.Scale");
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace odmoe {

/// The gRPC metadata key and value prefix that carry the API key.
inline constexpr char kAuthorizationMetadata[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

struct AdminCaller {
  std::string peer;  // grpc::ServerContext::peer(): "ipv4:10.0.0.5:50123", ...
  std::optional<std::string> authorization;  // the "authorization" metadata, if sent
  bool certificate_verified = false;         // a client certificate checked against the CA
};

/// OK, UNAUTHENTICATED or PERMISSION_DENIED (see above); the message names
/// `call`, and the caller's address when it is refused for being remote.
absl::Status AuthorizeAdminCall(const AdminCaller& caller, std::string_view api_key,
                                std::string_view call);

/// Whether a grpc::ServerContext::peer() string ("ipv4:127.0.0.1:50123",
/// "ipv6:[::1]:50123", "ipv6:%5B::1%5D:50123", "unix:/path") is a caller on
/// this machine: a loopback address (topology.h, IsLoopbackHost) or a Unix
/// socket.
bool IsLoopbackPeer(std::string_view peer);

}  // namespace odmoe
