// One request's generation as a state machine that whoever runs the forwards
// advances: RunGeneration (engine/generation.h) for one request at a time,
// BatchGenerator (engine/batch_generator.h) for several in one batch. Both
// therefore sample, stop, score and stream exactly alike.
//
//   Sequence seq(tokenizer, request, prompt_ids, on_token);
//   while (!seq.done()) {
//     std::span<const int32_t> rows = seq.Pending(max_rows);   // prompt rows, or the last token
//     ... forward `rows` at positions seq.pos() ... -> logits of the last row
//     seq.Consumed(rows.size(), logits);                      // samples when the prompt is in
//   }
//   GenerateResult r = seq.TakeResult();
//
// Speculative decoding runs the pending token and drafted ones in one
// forward and calls ConsumedDrafts(drafts, logits_of_every_row) instead.
//
// Every token is sampled through the whole chain (sampler.h): the request's
// logit_bias and penalties on this sequence's history (the prompt, then each
// emitted token), min_tokens' ban on EOS and stop_token_ids, the constraint
// set with SetConstraint (a grammar), then the request's sampling. A
// speculative row is processed after the drafts before it were emitted, so
// it sees the history and the constraint state it would have seen without
// speculation: the output distribution is exactly Consumed's.
//
//   Sequence seq(tokenizer, request, prompt_ids, on_token);
//   seq.SetConstraint(std::move(grammar));   // optional, before the first token
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/generation.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {

class Sequence {
 public:
  /// `prompt_ids` as PreparePrompt returns them (non-empty, fitting the
  /// context with max_tokens). `should_stop` and `on_logprobs` as in
  /// GenerationHooks. The request's clock starts here (TTFT counts from it).
  Sequence(const Tokenizer& tokenizer, const GenerateRequest& request,
           std::vector<int32_t> prompt_ids, GenerationCallback on_token = {},
           std::function<bool()> should_stop = {},
           std::function<void(const RowScore&)> on_logprobs = {});

  /// A rule every sampled token must follow (MaskLogits before each token,
  /// Accept after each emitted one); null: none. Set it before the first
  /// token is sampled (before the prompt's last Consumed).
  void SetConstraint(std::unique_ptr<TokenConstraint> constraint) {
    constraint_ = std::move(constraint);
  }

  /// The rows to run next: up to `max_rows` prompt rows not yet run, or,
  /// once the prompt is in, the one token sampled last. Empty when done.
  std::span<const int32_t> Pending(int64_t max_rows) const;
  /// The position of the first pending row.
  int pos() const { return pos_; }
  bool prefilling() const { return prefilled_ < result_.prompt_ids.size(); }
  /// `rows` pending rows went through the model (at pos() on). `logits` is
  /// the last row's n_vocab logits; it is read only when these rows end the
  /// prompt or were the decode row (then the next token is sampled, scored,
  /// streamed and the stop rules applied).
  void Consumed(int64_t rows, std::span<const float> logits);
  /// Speculative decoding, once the prompt is in: the decode row and then
  /// `drafts` (a drafter's guesses of the tokens that follow it) went
  /// through the model at pos() on; `logits` holds their 1 + drafts.size()
  /// rows. Row i's token is sampled with drafts[i] as the draft
  /// (Sampler::SampleDraft); each accepted draft is emitted as Consumed would
  /// have emitted it, and the first token that is not a draft (the
  /// correction, or the token after the last draft) ends the iteration. The
  /// stop rules apply to every token. pos() moves past the rows whose input
  /// was right. Returns the drafts accepted.
  int ConsumedDrafts(std::span<const int32_t> drafts, std::span<const float> logits);
  bool done() const { return done_; }
  int max_tokens() const { return max_tokens_; }
  /// Where Transformer::Forward appends routing records (null unless the
  /// request asked for them).
  std::vector<TokenRouting>* routing() {
    return record_routing_ ? &result_.routing : nullptr;
  }
  const GenerateResult& result() const { return result_; }
  /// Flushes the streaming decoder and the timings; call once, when done.
  GenerateResult TakeResult();

 private:
  void Finish(GenerateResult::StopReason reason);
  // The next token from one row of raw logits through the whole chain;
  // with `draft` (>= 0) by the rejection rule (*took: the draft was taken).
  int32_t Next(std::span<const float> row, int32_t draft, bool* took);
  // Emits `next`, sampled from `row`: TTFT, EOS and stop tokens, logprobs,
  // streaming, the history and the constraint, the stop rules; then it is
  // the token to run next unless the sequence ended.
  void Emit(std::span<const float> row, int32_t next);

  const Tokenizer& tokenizer_;
  const int max_tokens_;
  const bool ignore_eos_;
  const int min_tokens_;
  std::vector<int32_t> stop_token_ids_;  // sorted
  std::vector<int32_t> min_tokens_ban_;  // EOS (unless ignored) and stop_token_ids
  const int logprobs_;
  const bool record_routing_;
  GenerationCallback on_token_;
  std::function<bool()> should_stop_;
  std::function<void(const RowScore&)> on_logprobs_;
  Sampler sampler_;
  std::unique_ptr<TokenConstraint> constraint_;
  IncrementalDecoder decoder_;
  GenerateResult result_;
  size_t prefilled_ = 0;  // prompt rows run
  int pos_ = 0;
  int32_t next_ = -1;  // the sampled token still to run
  bool done_ = false;
  std::chrono::steady_clock::time_point start_, decode_start_;
};

}  // namespace odmoe
