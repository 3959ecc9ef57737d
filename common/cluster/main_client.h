// A client of the main node's Generate call (the `odmoe complete` command,
// tests and benchmarks). No gRPC types in this header.
//
//   v1::GenerateRequest req;  req.set_prompt("Once upon a time");  req.set_max_tokens(32);
//   ODMOE_ASSIGN_OR_RETURN(v1::GenerateStats stats, GenerateOnMain("127.0.0.1:7700", req,
//       [](int32_t id, std::string_view text) { std::cout << text << std::flush; }));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"

namespace odmoe {

/// Streams the tokens of one completion to `on_token` and returns the final
/// statistics. The main node's error (with its code) when it refuses.
absl::StatusOr<v1::GenerateStats> GenerateOnMain(
    const std::string& address, const v1::GenerateRequest& request,
    const std::function<void(int32_t id, std::string_view text)>& on_token,
    absl::Duration timeout = absl::Minutes(30));

/// The Scale admin call: the first `workers` workers take layers from the
/// next token boundary on. Returns the live groups as of now. The call
/// carries a credential of `auth`, which must be an operator's
/// (PeerAuth::ForOperator): the main node refuses it without one
/// (UNAUTHENTICATED) and from any other role (PERMISSION_DENIED;
/// docs/operations.md, Security).
absl::StatusOr<v1::ScaleReply> ScaleOnMain(const std::string& address, int workers,
                                           const PeerAuth* auth,
                                           absl::Duration timeout = absl::Seconds(10));

}  // namespace odmoe
