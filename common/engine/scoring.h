// Scoring a token sequence (teacher forcing): for every position i, the
// log-probability the model gives the token that actually comes next, and
// the token it would have chosen itself (greedy), optionally with the top-N
// alternatives. The perplexity tool (engine/perplexity.h) is built on it, and
// so is the main node's Score call; "logprobs" / "echo" of an OpenAI-style
// completion are the same numbers.
//
// Exactness. The sequence runs through Transformer::ForwardBatches, the very
// layer code of generation, and the LM head of each row is computed by
// Transformer::RowLogits, which gives each row the bits Logits() would give it
// during generation (the backend's per-row contract). So score i is a pure
// function of the float logits generation computes after tokens [0, i]:
//
//   logprob = (double)l[t] - (double)max(l) - log(sum_v exp((double)l[v] - (double)max(l)))
//
// with the sum taken in double, in vocabulary order (the same bits on every
// machine with the same libm). top1 is Argmax of sampler.h (ties: lowest id),
// the token greedy generation picks. Both are ScoreLogitRow of
// backend/logit_scores.h; without top-N alternatives the backend computes them
// where the logits are (Transformer::ScoresOfRows), so only the scores, not
// the logits, come to the host.
//
//   ScoreOptions opt{.first = 256, .top_n = 0};
//   ODMOE_ASSIGN_OR_RETURN(ScoreResult r, ScoreTokens(*transformer, *experts, ids, opt));
//   // r.next_logprobs[i]: log p(ids[256 + i + 1] | ids[0 .. 256 + i])
//   // r.top1[i]: the most likely token after ids[0 .. 256 + i]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/expert_executor.h"
#include "engine/transformer.h"

namespace odmoe {

/// At most this many alternatives per position (OpenAI's API allows 20).
inline constexpr int kMaxScoreTopN = 20;
/// Longest sequence one call scores, whatever the context (a request cap).
inline constexpr int kMaxScoreTokens = 1 << 17;
/// Cap on tokens * (1 + top_n): bounds the size of a result.
inline constexpr int64_t kMaxScoreEntries = int64_t{1} << 20;

struct TokenLogprob {
  int32_t id = -1;
  double logprob = 0;
  bool operator==(const TokenLogprob&) const = default;
};

/// The scores of one row of logits.
struct RowScore {
  int32_t target = -1;            // the token scored
  double target_logprob = 0;      // log-softmax at `target` (0 when target < 0)
  int32_t top1 = -1;              // Argmax (lowest id on ties)
  std::vector<TokenLogprob> top;  // top_n, descending logprob, ties by lower id
};

/// Log-softmax of one row, in double (see the header comment). `target` may
/// be -1 (nothing to score); 0 <= top_n <= kMaxScoreTopN (clamped to the row).
RowScore ScoreLogitsRow(std::span<const float> logits, int32_t target, int top_n);

struct ScoreOptions {
  int first = 0;  // positions before it run through the model but are not scored
  int top_n = 0;  // alternatives per position, 0..kMaxScoreTopN
};

/// Scores of positions [first, n) of an n-token sequence.
struct ScoreResult {
  int first = 0;
  /// [n - 1 - first]: entry i is log p(tokens[first + i + 1] | tokens[0 .. first + i]).
  std::vector<double> next_logprobs;
  /// [n - first]: entry i is the greedy token after tokens[0 .. first + i].
  std::vector<int32_t> top1;
  /// [n - first] when top_n > 0, else empty.
  std::vector<std::vector<TokenLogprob>> top;
  double seconds = 0;  // the forward and the scoring
};

/// The checks a scoring request needs before it runs: 1 <= n <= n_ctx and
/// <= kMaxScoreTokens, ids in [0, n_vocab), 0 <= first < n, 0 <= top_n <=
/// kMaxScoreTopN, n * (1 + top_n) <= kMaxScoreEntries. INVALID_ARGUMENT with
/// the reason.
absl::Status ValidateScoreRequest(std::span<const int32_t> tokens, const ScoreOptions& options,
                                  int n_vocab, int n_ctx);

/// Runs `tokens` from position 0 (the KV cache is overwritten) and scores
/// positions [first, n). Rows before `first` skip the LM head.
absl::StatusOr<ScoreResult> ScoreTokens(Transformer& transformer, ExpertExecutor& experts,
                                        std::span<const int32_t> tokens,
                                        const ScoreOptions& options);

/// Several sequences scored in one forward batch, each from position 0 in
/// its own KV slot (sequence s in slot s): what ScoreTokens gives each of
/// them alone, bit for bit (a row's result does not depend on the other
/// rows of its batch), at the cost of one pass over the weights for all of
/// them. Every sequence is checked as ScoreTokens checks it; INVALID_ARGUMENT
/// as well when there are none, more than the transformer's n_seq, or more
/// tokens in all than its n_batch. Each result's `seconds` is the whole call.
///
///   // transformer with n_seq >= 4 and n_batch >= 4 * 128
///   std::vector<std::span<const int32_t>> chunks = {c0, c1, c2, c3};  // 128 tokens each
///   ODMOE_ASSIGN_OR_RETURN(std::vector<ScoreResult> r,
///                          ScoreSequences(*transformer, *experts, chunks, {.first = 64}));
absl::StatusOr<std::vector<ScoreResult>> ScoreSequences(
    Transformer& transformer, ExpertExecutor& experts,
    std::span<const std::span<const int32_t>> sequences, const ScoreOptions& options);

}  // namespace odmoe
