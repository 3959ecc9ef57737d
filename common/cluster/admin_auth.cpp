#include "cluster/admin_auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "topology/topology.h"
#include "util/string_view.h"

namespace odmoe {
namespace {

// Compares a presented secret with the configured one in time that does not
// depend on where they first differ (only on the length).
bool SameSecret(std::string_view presented, std::string_view secret) {
  if (presented.size() != secret.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ secret[i]);
  }
  return diff == 0;
}

}  // namespace

absl::Status AuthorizeAdminCall(const AdminCaller& caller, std::string_view api_key,
                                std::string_view call) {
  if (!api_key.empty() && caller.authorization.has_value() &&
      SameSecret(*caller.authorization, absl::StrCat(kBearerPrefix, ToAbsl(api_key)))) {
    return absl::OkStatus();
  }
  if (caller.certificate_verified) return absl::OkStatus();
  if (!api_key.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat(ToAbsl(call), " needs the API key (gRPC metadata \"", kAuthorizationMetadata,
                     ": ", kBearerPrefix, "<main.api_key>\") or a node_tls client certificate"));
  }
  if (IsLoopbackPeer(caller.peer)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(ToAbsl(call), " from ", caller.peer,
                   " refused: with neither main.api_key nor node_tls in the topology only "
                   "callers on the main node's machine (loopback) may make admin calls"));
}

bool IsLoopbackPeer(std::string_view std_peer) {
  const absl::string_view peer = ToAbsl(std_peer);
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) return true;
  std::string rest;
  if (absl::StartsWith(peer, "ipv4:")) {
    rest = std::string(peer.substr(5));
  } else if (absl::StartsWith(peer, "ipv6:")) {
    rest = absl::StrReplaceAll(peer.substr(5), {{"%5B", "["}, {"%5D", "]"}, {"%25", "%"}});
  } else {
    return false;
  }
  const size_t colon = rest.rfind(':');  // before the port
  if (colon == std::string::npos || colon == 0) return false;
  return IsLoopbackHost(rest.substr(0, colon));
}

}  // namespace odmoe
