// Perplexity of a model on a text, with the conventions of llama.cpp's
// perplexity tool, so numbers can be compared with the ones users know:
//
//   - the whole text is tokenized once, with BOS when the vocabulary asks for
//     it (Tokenizer::Encode's default);
//   - it is cut into n_chunks = floor(n_tokens / ctx) non-overlapping chunks
//     of ctx tokens (optionally at most max_chunks); the tail is not used;
//   - the first token of every chunk is replaced by BOS (when the vocabulary
//     adds BOS), then the chunk is evaluated from position 0 with an empty
//     KV cache;
//   - only the second half is scored: positions j in [ctx/2, ctx - 1), each
//     with nll_j = -log softmax(logits[j])[token j+1], in double;
//   - after each chunk the running estimate exp(sum nll / count) is printed
//     as "[k]%.4f,"; at the end
//       "Final estimate: PPL = %.4f +/- %.5f"
//     where the error is PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1))
//     (llama.cpp's formula; omitted when that variance is not positive).
//
// Two differences from llama.cpp, both deliberate: llama.cpp's log-softmax
// takes exp in float and sums in double, ours is double throughout (the
// numbers agree to about 1e-6 relative); llama.cpp refuses a text of fewer
// than 2 * ctx tokens, we need one chunk (ctx tokens).
//
//   ODMOE_ASSIGN_OR_RETURN(PerplexityPlan plan,
//                          PlanPerplexity(ids.size(), {.ctx = 512}, model_ctx, bos_id));
//   ODMOE_ASSIGN_OR_RETURN(PerplexityResult r, RunPerplexity(ids, plan,
//       [&](std::span<const int32_t> chunk, int first) {
//         return engine->Score(chunk, {.first = first});
//       }, [](const ChunkProgress& p) { std::printf("[%d]%.4f,", p.chunk + 1, p.running_ppl); }));
//   std::puts(FormatFinalEstimate(r.nll).c_str());
//
// RunPerplexityBatched hands the scorer several chunks per call (an engine
// that scores them in one forward batch: ReferenceEngine::ScoreSequences).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/scoring.h"

namespace odmoe {

/// Sums of the per-token negative log-likelihoods (double).
class NllAccumulator {
 public:
  void Add(double nll) {
    sum_ += nll;
    sum_squares_ += nll * nll;
    ++count_;
  }
  int64_t count() const { return count_; }
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  /// exp(mean nll); 1 when nothing was added.
  double perplexity() const;
  /// perplexity * sqrt((mean(nll^2) - mean^2) / (count - 1)); 0 when the
  /// variance is not positive or count < 2.
  double perplexity_error() const;

 private:
  double sum_ = 0, sum_squares_ = 0;
  int64_t count_ = 0;
};

/// "Final estimate: PPL = 12.3456 +/- 0.12345" (without the error when it is 0).
std::string FormatFinalEstimate(const NllAccumulator& nll);

struct PerplexityOptions {
  int ctx = 0;         // tokens per chunk; 0 = min(512, the context)
  int max_chunks = 0;  // 0 = every whole chunk
};

struct PerplexityPlan {
  int ctx = 0;
  int n_chunks = 0;
  int first = 0;         // first scored position of a chunk: ctx / 2
  int32_t bos_id = -1;   // replaces each chunk's first token; -1 = keep it
  int64_t n_tokens = 0;  // of the whole text
  int64_t scored_per_chunk() const { return ctx - 1 - first; }
};

/// Checks and plans: INVALID_ARGUMENT when ctx < 4, ctx > `context` (the
/// model's, or the cluster's KV capacity), or the text has fewer than ctx
/// tokens; max_chunks < 0 is an error too. `bos_id` is the BOS to put first
/// in every chunk, -1 when the vocabulary adds none.
absl::StatusOr<PerplexityPlan> PlanPerplexity(int64_t n_tokens, const PerplexityOptions& options,
                                              int context, int32_t bos_id);

/// The tokens of chunk `chunk` as evaluated (first token replaced by BOS).
std::vector<int32_t> ChunkTokens(std::span<const int32_t> tokens, const PerplexityPlan& plan,
                                 int chunk);

struct ChunkProgress {
  int chunk = 0;  // 0-based
  int n_chunks = 0;
  double running_ppl = 0;
  double chunk_seconds = 0;
  double elapsed_seconds = 0;
  double tokens_per_second = 0;  // evaluated tokens (ctx per chunk) so far / elapsed
};

struct PerplexityResult {
  NllAccumulator nll;
  std::vector<double> running_ppl;  // after each chunk
  /// Per chunk, the greedy token at each scored position j in [first, ctx - 1)
  /// (the prediction of token j + 1), for teacher-forced comparisons.
  std::vector<std::vector<int32_t>> top1;
  /// Per chunk, the log-probability of the actual next token at each scored
  /// position, and the scorer's top alternatives there (empty when it was
  /// asked for none).
  std::vector<std::vector<double>> next_logprob;
  std::vector<std::vector<std::vector<TokenLogprob>>> top;
  int64_t top1_matches = 0;  // scored positions whose greedy token is the actual next one
  double seconds = 0;
};

/// Scores one chunk (ctx tokens) from position 0, positions [first, ctx).
using ChunkScorer =
    std::function<absl::StatusOr<ScoreResult>(std::span<const int32_t> chunk, int first)>;

/// Scores several chunks at once (ctx tokens each, each from position 0),
/// positions [first, ctx) of each: one result per chunk, in order.
using ChunksScorer = std::function<absl::StatusOr<std::vector<ScoreResult>>(
    std::span<const std::vector<int32_t>> chunks, int first)>;

/// A ChunksScorer that calls `score` on each chunk in turn.
ChunksScorer OneChunkAtATime(ChunkScorer score);

/// Runs every chunk of the plan through `score`, accumulating the NLL of the
/// scored positions; `on_chunk` (optional) after each. A scorer's error, or
/// a result of the wrong shape (DATA_LOSS), ends the run.
absl::StatusOr<PerplexityResult> RunPerplexity(
    std::span<const int32_t> tokens, const PerplexityPlan& plan, const ChunkScorer& score,
    const std::function<void(const ChunkProgress&)>& on_chunk = nullptr);

/// RunPerplexity handing the scorer `chunks_per_call` chunks at a time (the
/// last call the rest), as llama.cpp's tool evaluates n_batch / ctx chunks
/// per pass: the same numbers when the scorer scores each chunk as it would
/// alone. `on_chunk` is called for each chunk after its call (chunk_seconds:
/// the call's time shared out). INVALID_ARGUMENT for chunks_per_call < 1;
/// DATA_LOSS when a call returns another number of results.
absl::StatusOr<PerplexityResult> RunPerplexityBatched(
    std::span<const int32_t> tokens, const PerplexityPlan& plan, int chunks_per_call,
    const ChunksScorer& score,
    const std::function<void(const ChunkProgress&)>& on_chunk = nullptr);

}  // namespace odmoe
