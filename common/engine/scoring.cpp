#include "engine/scoring.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "engine/sampler.h"
#include "util/status_macros.h"

namespace odmoe {

RowScore ScoreLogitsRow(std::span<const float> logits, int32_t target, int top_n) {
  RowScore r;
  r.target = target;
  if (logits.empty()) return r;
  const LogitRowScore base =
      ScoreLogitRow(logits.data(), static_cast<int64_t>(logits.size()), target);
  r.top1 = base.top1;
  r.target_logprob = base.target_logprob;
  const size_t n =
      std::min(logits.size(), static_cast<size_t>(std::clamp(top_n, 0, kMaxScoreTopN)));
  if (n > 0) {
    const double max_logit = logits[static_cast<size_t>(r.top1)];
    auto logprob = [&](int32_t id) {
      return static_cast<double>(logits[static_cast<size_t>(id)]) - max_logit - base.log_sum;
    };
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    auto better = [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), ids.end(), better);
    for (size_t i = 0; i < n; ++i) r.top.push_back({ids[i], logprob(ids[i])});
  }
  return r;
}

absl::Status ValidateScoreRequest(std::span<const int32_t> tokens, const ScoreOptions& options,
                                  int n_vocab, int n_ctx) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 1) return absl::InvalidArgumentError("nothing to score: the token list is empty");
  if (n > n_ctx || n > kMaxScoreTokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d tokens do not fit the context of %d tokens", n, std::min(n_ctx, kMaxScoreTokens)));
  }
  if (options.top_n < 0 || options.top_n > kMaxScoreTopN) {
    return absl::InvalidArgumentError(
        absl::StrFormat("top_n must be in [0, %d], got %d", kMaxScoreTopN, options.top_n));
  }
  if (options.first < 0 || options.first >= n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "first scored position %d is outside the sequence of %d tokens", options.first, n));
  }
  if (n * (1 + options.top_n) > kMaxScoreEntries) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d tokens with top_n %d exceed the limit of %d scores per request", n,
                        options.top_n, kMaxScoreEntries));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token id %d outside the vocabulary [0, %d)", t, n_vocab));
    }
  }
  return absl::OkStatus();
}

namespace {

// Reserves a result for scoring positions [first, n) of an n-token sequence.
ScoreResult EmptyResult(int64_t n, const ScoreOptions& options) {
  ScoreResult result;
  result.first = options.first;
  result.top1.reserve(static_cast<size_t>(n - options.first));
  result.next_logprobs.reserve(static_cast<size_t>(n - 1 - options.first));
  if (options.top_n > 0) result.top.reserve(static_cast<size_t>(n - options.first));
  return result;
}

// The token after position `pos` of `tokens` (-1 after the last).
int32_t NextToken(std::span<const int32_t> tokens, int64_t pos) {
  return pos + 1 < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(pos + 1)]
                                                         : -1;
}

// Appends the scores of position `pos` of `tokens`, whose logits are `row`.
void AddRowScore(std::span<const float> row, std::span<const int32_t> tokens, int64_t pos,
                 int top_n, ScoreResult* result) {
  const int32_t next = NextToken(tokens, pos);
  RowScore s = ScoreLogitsRow(row, next, top_n);
  if (next >= 0) result->next_logprobs.push_back(s.target_logprob);
  result->top1.push_back(s.top1);
  if (top_n > 0) result->top.push_back(std::move(s.top));
}

// Appends a score the backend computed (no top-N) for position `pos`.
void AddRowScore(const LogitRowScore& s, std::span<const int32_t> tokens, int64_t pos,
                 ScoreResult* result) {
  if (NextToken(tokens, pos) >= 0) result->next_logprobs.push_back(s.target_logprob);
  result->top1.push_back(s.top1);
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Where a scored row of the batch belongs: sequence index and position.
using RowPlace = std::pair<size_t, int64_t>;

// Scores rows[i] of the batch in flight, position where[i].second of
// sequences[where[i].first], into results[where[i].first], in order: without
// top-N on the backend (only the scores come to the host), with it from the
// logits, max_logit_rows() rows at a time.
absl::Status ScoreBatchRows(Transformer& transformer, std::span<const int64_t> rows,
                            std::span<const RowPlace> where,
                            std::span<const std::span<const int32_t>> sequences, int top_n,
                            ScoreResult* results) {
  if (top_n == 0) {
    std::vector<int32_t> targets;
    targets.reserve(rows.size());
    for (const auto& [s, pos] : where) targets.push_back(NextToken(sequences[s], pos));
    std::vector<LogitRowScore> scores;
    ODMOE_RETURN_IF_ERROR(transformer.ScoresOfRows(rows, targets, &scores));
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [s, pos] = where[i];
      AddRowScore(scores[i], sequences[s], pos, &results[s]);
    }
    return absl::OkStatus();
  }
  const size_t vocab = static_cast<size_t>(transformer.config().n_vocab);
  const size_t piece = static_cast<size_t>(transformer.max_logit_rows());
  std::vector<float> logits;
  for (size_t begin = 0; begin < rows.size(); begin += piece) {
    const size_t m = std::min(rows.size() - begin, piece);
    ODMOE_RETURN_IF_ERROR(transformer.LogitsOfRows(rows.subspan(begin, m), &logits));
    for (size_t i = 0; i < m; ++i) {
      const auto [s, pos] = where[begin + i];
      AddRowScore(std::span<const float>(logits.data() + i * vocab, vocab), sequences[s], pos,
                  top_n, &results[s]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScoreResult> ScoreTokens(Transformer& transformer, ExpertExecutor& experts,
                                        std::span<const int32_t> tokens,
                                        const ScoreOptions& options) {
  const ModelConfig& c = transformer.config();
  ODMOE_RETURN_IF_ERROR(ValidateScoreRequest(tokens, options, c.n_vocab, transformer.n_ctx()));
  const auto t0 = std::chrono::steady_clock::now();
  ScoreResult result = EmptyResult(static_cast<int64_t>(tokens.size()), options);
  const std::span<const int32_t> sequence[] = {tokens};
  std::vector<int64_t> rows;
  std::vector<RowPlace> where;
  auto score_batch = [&](int64_t first_row) -> absl::Status {
    rows.clear();
    where.clear();
    for (int64_t r = std::max<int64_t>(0, options.first - first_row); r < transformer.rows();
         ++r) {
      rows.push_back(r);
      where.emplace_back(0, first_row + r);
    }
    return ScoreBatchRows(transformer, rows, where, sequence, options.top_n, &result);
  };
  ODMOE_RETURN_IF_ERROR(transformer.ForwardBatches(tokens, 0, experts, nullptr, score_batch));
  result.seconds = SecondsSince(t0);
  return result;
}

absl::StatusOr<std::vector<ScoreResult>> ScoreSequences(
    Transformer& transformer, ExpertExecutor& experts,
    std::span<const std::span<const int32_t>> sequences, const ScoreOptions& options) {
  const ModelConfig& c = transformer.config();
  if (sequences.empty()) return absl::InvalidArgumentError("no sequences to score");
  if (static_cast<int64_t>(sequences.size()) > transformer.n_seq()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d sequences to score at once, but the transformer has %d KV slots",
                        sequences.size(), transformer.n_seq()));
  }
  int64_t total = 0;
  for (std::span<const int32_t> seq : sequences) {
    ODMOE_RETURN_IF_ERROR(ValidateScoreRequest(seq, options, c.n_vocab, transformer.n_ctx()));
    total += static_cast<int64_t>(seq.size());
  }
  if (total > transformer.n_batch()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d tokens in all do not fit one batch of %d rows", total, transformer.n_batch()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(total));
  std::vector<Transformer::Segment> segments;
  // The scored rows of the batch, and the sequence and position of each.
  std::vector<int64_t> rows;
  std::vector<RowPlace> where;
  std::vector<ScoreResult> results;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const int64_t n = static_cast<int64_t>(sequences[s].size());
    const int64_t row0 = static_cast<int64_t>(tokens.size());
    segments.push_back({static_cast<int>(s), 0, n});
    tokens.insert(tokens.end(), sequences[s].begin(), sequences[s].end());
    for (int64_t pos = options.first; pos < n; ++pos) {
      rows.push_back(row0 + pos);
      where.emplace_back(s, pos);
    }
    results.push_back(EmptyResult(n, options));
  }
  ODMOE_RETURN_IF_ERROR(transformer.ForwardSegments(tokens, segments, experts));
  ODMOE_RETURN_IF_ERROR(
      ScoreBatchRows(transformer, rows, where, sequences, options.top_n, results.data()));
  const double seconds = SecondsSince(t0);
  for (ScoreResult& r : results) r.seconds = seconds;
  return results;
}

}  // namespace odmoe
