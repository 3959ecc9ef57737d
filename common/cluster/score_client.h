// A client of the main node's Score and Tokenize calls (odmoe-perplexity
// --main, tests), with plain types: no gRPC or protobuf in this header.
//
//   ODMOE_ASSIGN_OR_RETURN(RemoteTokens t, TokenizeOnMain("127.0.0.1:7700", text));
//   // t.ids (BOS first when the vocabulary adds it), t.bos_id, t.context ...
//   ODMOE_ASSIGN_OR_RETURN(RemoteScore s, ScoreOnMain("127.0.0.1:7700", chunk, {.first = 256}));
//   // s.score.next_logprobs[i] = log p(chunk[256 + i + 1] | chunk[0 .. 256 + i])
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/scoring.h"

namespace odmoe {

/// The main node's tokenization of a text, and what a client needs to know
/// about its model to plan a perplexity run.
struct RemoteTokens {
  std::vector<int32_t> ids;
  int32_t bos_id = -1;   // -1 when the vocabulary has none
  bool add_bos = false;  // the vocabulary adds BOS (ids start with it)
  int n_vocab = 0;
  int context = 0;  // the main node's KV capacity in tokens
};

/// Main.Tokenize. UNAVAILABLE (naming the address) when the node cannot be
/// reached; the node's INVALID_ARGUMENT for a text it refuses.
absl::StatusOr<RemoteTokens> TokenizeOnMain(const std::string& address, std::string_view text,
                                            absl::Duration timeout = absl::Seconds(60));

struct RemoteScore {
  ScoreResult score;  // as ReferenceEngine::Score returns it
  uint64_t request_id = 0;
};

/// Main.Score of a token sequence. The reply is checked against the request
/// (DATA_LOSS when it has the wrong number of entries or echoes other tokens).
absl::StatusOr<RemoteScore> ScoreOnMain(const std::string& address, std::span<const int32_t> tokens,
                                        const ScoreOptions& options,
                                        absl::Duration timeout = absl::Minutes(30));

}  // namespace odmoe
