// What one anonymous caller of the Main gRPC service may cost. Main.Generate,
// Main.Score and Main.Tokenize carry no credential (any process that reaches
// the main node's gRPC port may call them; only Main.Scale and Node.Trace
// need an operator's, cluster/peer_auth.h), so their costs are bounded here:
//
// - Tokenize text: at most kMaxTokenizeTextBytes a call (INVALID_ARGUMENT
//   past it). Tokenizing costs about 100 bytes of memory per byte of text
//   (SentencePiece merges the whole text at once), so the text being
//   tokenized at once by Tokenize and Score calls together is at most
//   kTokenizeBytesInFlight, in at most kMaxTokenizeCalls calls; a call past
//   either is refused at once with RESOURCE_EXHAUSTED naming the limit (retry
//   later). The rule: the size fits 8 contexts of 131072 tokens at 4 bytes a
//   token, or 3 copies of wikitext-2's test set (1.25 MiB, what
//   odmoe-perplexity --main sends in one call); the budget lets one such call
//   run at a time, about 0.4 GB at its peak.
// - The request queue (main.max_running + main.max_queue places): where the
//   main node also serves the HTTP API, gRPC Generate and Score calls hold at
//   most main.max_running + main.max_queue / 2 places (running or waiting) at
//   once; the other max_queue - max_queue / 2 waiting places stay for HTTP
//   clients, whom gRPC callers can therefore not lock out. Past it:
//   RESOURCE_EXHAUSTED naming both settings. Without an HTTP API gRPC callers
//   share the whole queue.
//
//   MainCallLimits limits(topology.main.max_running, topology.main.max_queue);
//   ODMOE_ASSIGN_OR_RETURN(MainCallLimits::TokenizeTurn t,
//                          limits.AdmitTokenize("Main.Tokenize", text.size()));
//   ... tokenize ...                           // t gives its share back when destroyed
//   ODMOE_ASSIGN_OR_RETURN(Budget::Share s, limits.AdmitGrpcQueued("Main.Generate"));
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "util/budget.h"

namespace odmoe {

inline constexpr size_t kMaxTokenizeTextBytes = 4u << 20;
inline constexpr size_t kTokenizeBytesInFlight = 4u << 20;
inline constexpr int kMaxTokenizeCalls = 4;

class MainCallLimits {
 public:
  MainCallLimits(int max_running, int max_queue);

  /// The right to tokenize a text of `text_bytes` now.
  struct TokenizeTurn {
    Budget::Share call;
    Budget::Share bytes;
  };
  /// INVALID_ARGUMENT when the text exceeds kMaxTokenizeTextBytes;
  /// RESOURCE_EXHAUSTED when kMaxTokenizeCalls calls tokenize already or the
  /// text does not fit what is left of kTokenizeBytesInFlight. `call` names
  /// the caller in the message ("Main.Tokenize").
  absl::StatusOr<TokenizeTurn> AdmitTokenize(std::string_view call, size_t text_bytes);

  /// A gRPC caller's place in the request queue's share (see above): taken
  /// before MainNode::Admit, held until the call ends. RESOURCE_EXHAUSTED
  /// when the share is full.
  absl::StatusOr<Budget::Share> AdmitGrpcQueued(std::string_view call);
  int grpc_queue_share() const { return static_cast<int>(grpc_queued_.capacity()); }

 private:
  Budget tokenize_calls_;
  Budget tokenize_bytes_;
  Budget grpc_queued_;
};

}  // namespace odmoe
