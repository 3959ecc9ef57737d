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
  r.top1 = Argmax(logits);
  const double max_logit = logits[static_cast<size_t>(r.top1)];
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_sum = std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<double>(logits[static_cast<size_t>(id)]) - max_logit - log_sum;
  };
  if (target >= 0 && static_cast<size_t>(target) < logits.size()) {
    r.target_logprob = logprob(target);
  }
  const size_t n =
      std::min(logits.size(), static_cast<size_t>(std::clamp(top_n, 0, kMaxScoreTopN)));
  if (n > 0) {
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

absl::StatusOr<ScoreResult> ScoreTokens(Transformer& transformer, ExpertExecutor& experts,
                                        std::span<const int32_t> tokens,
                                        const ScoreOptions& options) {
  const ModelConfig& c = transformer.config();
  ODMOE_RETURN_IF_ERROR(ValidateScoreRequest(tokens, options, c.n_vocab, transformer.n_ctx()));
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(tokens.size());
  ScoreResult result;
  result.first = options.first;
  result.top1.reserve(static_cast<size_t>(n - options.first));
  result.next_logprobs.reserve(static_cast<size_t>(n - 1 - options.first));
  std::vector<float> logits;
  auto score_batch = [&](int64_t first_row) -> absl::Status {
    const int64_t rows = transformer.rows();
    const int64_t skip = std::max<int64_t>(0, options.first - first_row);
    if (skip >= rows) return absl::OkStatus();
    ODMOE_RETURN_IF_ERROR(transformer.RowLogits(skip, &logits));
    for (int64_t r = skip; r < rows; ++r) {
      const int64_t pos = first_row + r;
      const int32_t next = pos + 1 < n ? tokens[static_cast<size_t>(pos + 1)] : -1;
      std::span<const float> row(logits.data() + (r - skip) * c.n_vocab,
                                 static_cast<size_t>(c.n_vocab));
      RowScore s = ScoreLogitsRow(row, next, options.top_n);
      if (next >= 0) result.next_logprobs.push_back(s.target_logprob);
      result.top1.push_back(s.top1);
      if (options.top_n > 0) result.top.push_back(std::move(s.top));
    }
    return absl::OkStatus();
  };
  ODMOE_RETURN_IF_ERROR(transformer.ForwardBatches(tokens, 0, experts, nullptr, score_batch));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace odmoe
