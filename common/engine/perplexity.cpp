#include "engine/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"

namespace odmoe {

double NllAccumulator::perplexity() const { return std::exp(mean()); }

double NllAccumulator::perplexity_error() const {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double m = sum_ / n;
  const double variance = sum_squares_ / n - m * m;
  if (!(variance > 0)) return 0.0;
  return perplexity() * std::sqrt(variance / (n - 1));
}

std::string FormatFinalEstimate(const NllAccumulator& nll) {
  const double error = nll.perplexity_error();
  if (error > 0) {
    return absl::StrFormat("Final estimate: PPL = %.4f +/- %.5f", nll.perplexity(), error);
  }
  return absl::StrFormat("Final estimate: PPL = %.4f", nll.perplexity());
}

absl::StatusOr<PerplexityPlan> PlanPerplexity(int64_t n_tokens, const PerplexityOptions& options,
                                              int context, int32_t bos_id) {
  PerplexityPlan plan;
  plan.ctx = options.ctx > 0 ? options.ctx : std::min(512, context);
  if (options.ctx < 0 || plan.ctx < 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--ctx must be at least 4 tokens, got %d", plan.ctx));
  }
  if (plan.ctx > context) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--ctx %d exceeds the context of %d tokens", plan.ctx, context));
  }
  if (options.max_chunks < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--chunks must be >= 0, got %d", options.max_chunks));
  }
  if (n_tokens < plan.ctx) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the text has %d tokens, fewer than one chunk of %d (use a longer text or a smaller "
        "--ctx)",
        n_tokens, plan.ctx));
  }
  const int64_t whole = n_tokens / plan.ctx;
  plan.n_chunks = static_cast<int>(
      options.max_chunks > 0 ? std::min<int64_t>(whole, options.max_chunks) : whole);
  plan.first = plan.ctx / 2;
  plan.bos_id = bos_id;
  plan.n_tokens = n_tokens;
  return plan;
}

std::vector<int32_t> ChunkTokens(std::span<const int32_t> tokens, const PerplexityPlan& plan,
                                 int chunk) {
  const size_t start = static_cast<size_t>(chunk) * static_cast<size_t>(plan.ctx);
  std::vector<int32_t> out(tokens.begin() + static_cast<ptrdiff_t>(start),
                           tokens.begin() + static_cast<ptrdiff_t>(start + plan.ctx));
  if (plan.bos_id >= 0) out[0] = plan.bos_id;
  return out;
}

ChunksScorer OneChunkAtATime(ChunkScorer score) {
  return [score = std::move(score)](std::span<const std::vector<int32_t>> chunks,
                                    int first) -> absl::StatusOr<std::vector<ScoreResult>> {
    std::vector<ScoreResult> results;
    for (const std::vector<int32_t>& chunk : chunks) {
      absl::StatusOr<ScoreResult> r = score(chunk, first);
      if (!r.ok()) return r.status();
      results.push_back(std::move(*r));
    }
    return results;
  };
}

absl::StatusOr<PerplexityResult> RunPerplexity(
    std::span<const int32_t> tokens, const PerplexityPlan& plan, const ChunkScorer& score,
    const std::function<void(const ChunkProgress&)>& on_chunk) {
  return RunPerplexityBatched(tokens, plan, 1, OneChunkAtATime(score), on_chunk);
}

absl::StatusOr<PerplexityResult> RunPerplexityBatched(
    std::span<const int32_t> tokens, const PerplexityPlan& plan, int chunks_per_call,
    const ChunksScorer& score, const std::function<void(const ChunkProgress&)>& on_chunk) {
  if (static_cast<int64_t>(tokens.size()) < int64_t{plan.n_chunks} * plan.ctx) {
    return absl::InvalidArgumentError("the plan does not match the tokens");
  }
  if (chunks_per_call < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunks per call must be >= 1, got %d", chunks_per_call));
  }
  const auto t0 = std::chrono::steady_clock::now();
  PerplexityResult result;
  const int64_t scored = plan.scored_per_chunk();
  for (int c0 = 0; c0 < plan.n_chunks; c0 += chunks_per_call) {
    const auto call_start = std::chrono::steady_clock::now();
    const int n = std::min(chunks_per_call, plan.n_chunks - c0);
    std::vector<std::vector<int32_t>> chunks;
    for (int i = 0; i < n; ++i) chunks.push_back(ChunkTokens(tokens, plan, c0 + i));
    absl::StatusOr<std::vector<ScoreResult>> rs = score(chunks, plan.first);
    if (!rs.ok()) return rs.status();
    if (static_cast<int>(rs->size()) != n) {
      return absl::DataLossError(absl::StrFormat(
          "chunks %d..%d: the scorer returned %d results for %d chunks", c0 + 1, c0 + n,
          rs->size(), n));
    }
    const auto now = std::chrono::steady_clock::now();
    result.seconds = std::chrono::duration<double>(now - t0).count();
    for (int i = 0; i < n; ++i) {
      const int c = c0 + i;
      const ScoreResult& r = (*rs)[static_cast<size_t>(i)];
      const std::vector<int32_t>& chunk = chunks[static_cast<size_t>(i)];
      if (static_cast<int64_t>(r.next_logprobs.size()) != scored ||
          static_cast<int64_t>(r.top1.size()) < scored) {
        return absl::DataLossError(absl::StrFormat(
            "chunk %d: the scorer returned %d log-probabilities and %d greedy tokens, expected %d",
            c + 1, r.next_logprobs.size(), r.top1.size(), scored));
      }
      std::vector<int32_t>& top1 =
          result.top1.emplace_back(r.top1.begin(), r.top1.begin() + scored);
      result.next_logprob.emplace_back(r.next_logprobs.begin(), r.next_logprobs.end());
      result.top.emplace_back(
          r.top.begin(),
          r.top.begin() + std::min<int64_t>(scored, static_cast<int64_t>(r.top.size())));
      for (int64_t j = 0; j < scored; ++j) {
        result.nll.Add(-r.next_logprobs[static_cast<size_t>(j)]);
        if (top1[static_cast<size_t>(j)] == chunk[static_cast<size_t>(plan.first + j + 1)]) {
          ++result.top1_matches;
        }
      }
      result.running_ppl.push_back(result.nll.perplexity());
      if (on_chunk) {
        ChunkProgress p;
        p.chunk = c;
        p.n_chunks = plan.n_chunks;
        p.running_ppl = result.running_ppl.back();
        p.chunk_seconds = std::chrono::duration<double>(now - call_start).count() / n;
        p.elapsed_seconds = result.seconds;
        p.tokens_per_second =
            result.seconds > 0 ? static_cast<double>(c + 1) * plan.ctx / result.seconds : 0.0;
        on_chunk(p);
      }
    }
  }
  return result;
}

}  // namespace odmoe
