#include "engine/sequence.h"

#include <algorithm>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_constraint.h"

namespace odmoe {
namespace {
double SecondsBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

Sequence::Sequence(const Tokenizer& tokenizer, const GenerateRequest& request,
                   std::vector<int32_t> prompt_ids, GenerationCallback on_token,
                   std::function<bool()> should_stop,
                   std::function<void(const RowScore&)> on_logprobs)
    : tokenizer_(tokenizer),
      max_tokens_(request.max_tokens),
      ignore_eos_(request.ignore_eos),
      min_tokens_(request.min_tokens),
      stop_token_ids_(request.stop_token_ids),
      logprobs_(request.logprobs),
      record_routing_(request.record_routing),
      on_token_(std::move(on_token)),
      should_stop_(std::move(should_stop)),
      on_logprobs_(std::move(on_logprobs)),
      sampler_(request.sampling),
      decoder_(tokenizer, /*continues_text=*/true),
      start_(std::chrono::steady_clock::now()) {
  result_.prompt_ids = std::move(prompt_ids);
  result_.stats.prompt_tokens = static_cast<int>(result_.prompt_ids.size());
  std::sort(stop_token_ids_.begin(), stop_token_ids_.end());
  if (min_tokens_ > 0) {
    min_tokens_ban_ = stop_token_ids_;
    if (!ignore_eos_) min_tokens_ban_.push_back(tokenizer_.eos_id());
  }
  sampler_.Accept(result_.prompt_ids);  // the penalties count the prompt (as llama-server)
  if (!request.grammar.empty()) {
    // PreparePrompt has checked the grammar; one that fails here anyway
    // ends the sequence before its first token rather than run unconstrained.
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnfCached(request.grammar);
    if (grammar.ok()) {
      SetConstraint(MakeGrammarConstraint(*std::move(grammar), tokenizer_, tokenizer_.eos_id()));
    } else {
      done_ = true;
    }
  }
}

std::span<const int32_t> Sequence::Pending(int64_t max_rows) const {
  if (done_ || max_rows < 1) return {};
  if (prefilling()) {
    const size_t n = std::min<size_t>(static_cast<size_t>(max_rows),
                                      result_.prompt_ids.size() - prefilled_);
    return std::span<const int32_t>(result_.prompt_ids).subspan(prefilled_, n);
  }
  return std::span<const int32_t>(&next_, 1);
}

void Sequence::Consumed(int64_t rows, std::span<const float> logits) {
  if (done_ || rows < 1) return;
  pos_ += static_cast<int>(rows);
  if (prefilling()) {
    prefilled_ += static_cast<size_t>(rows);
    if (prefilling()) return;  // a middle chunk of the prompt: nothing to sample yet
    const auto now = std::chrono::steady_clock::now();
    result_.stats.prefill_seconds = SecondsBetween(start_, now);
    decode_start_ = now;
  }
  bool took = false;
  Emit(logits, Next(logits, -1, &took));
}

int32_t Sequence::Next(std::span<const float> row, int32_t draft, bool* took) {
  const bool banning = static_cast<int>(result_.output_ids.size()) < min_tokens_;
  const std::span<const float> processed = sampler_.Process(
      row, banning ? std::span<const int32_t>(min_tokens_ban_) : std::span<const int32_t>(),
      constraint_.get());
  *took = false;
  return draft >= 0 ? sampler_.SampleDraft(processed, draft, took) : sampler_.Sample(processed);
}

int Sequence::ConsumedDrafts(std::span<const int32_t> drafts, std::span<const float> logits) {
  if (done_ || prefilling()) return 0;
  const size_t n_vocab = logits.size() / (drafts.size() + 1);
  int accepted = 0;
  for (size_t i = 0; i <= drafts.size() && !done_; ++i) {
    const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
    ++pos_;  // row i's input was right: its KV row stays
    // Row i after drafts[0, i) were emitted: their history, their constraint state.
    bool took = false;
    const int32_t next = Next(row, i < drafts.size() ? drafts[i] : -1, &took);
    Emit(row, next);
    if (!took) break;
    ++accepted;
  }
  return accepted;
}

void Sequence::Emit(std::span<const float> row, int32_t next) {
  if (result_.output_ids.empty() && result_.stats.ttft_seconds == 0) {
    result_.stats.ttft_seconds = SecondsBetween(start_, std::chrono::steady_clock::now());
  }
  if (next == Sampler::kNoToken) {  // biases and bans left no token: nothing may follow
    Finish(GenerateResult::StopReason::kEos);
    return;
  }
  const bool eos = next == tokenizer_.eos_id() && !ignore_eos_;
  if (eos || std::binary_search(stop_token_ids_.begin(), stop_token_ids_.end(), next)) {
    if (logprobs_ >= 0) result_.eos_logprob = ScoreLogitsRow(row, next, logprobs_);
    Finish(eos ? GenerateResult::StopReason::kEos : GenerateResult::StopReason::kStopToken);
    return;
  }
  if (constraint_ != nullptr && !constraint_->Accept(next).ok()) {
    // Only a token the mask allowed is ever sampled: a rule that refuses
    // one it allowed is broken; end here rather than continue outside it.
    Finish(GenerateResult::StopReason::kEos);
    return;
  }
  result_.output_ids.push_back(next);
  sampler_.Accept(next);
  if (logprobs_ >= 0) {
    result_.logprobs.push_back(ScoreLogitsRow(row, next, logprobs_));
    if (on_logprobs_) on_logprobs_(result_.logprobs.back());
  }
  std::string piece = decoder_.Push(next);
  result_.text += piece;
  if (on_token_) on_token_(next, piece);
  if (should_stop_ && should_stop_()) {
    Finish(GenerateResult::StopReason::kStopped);
    return;
  }
  if (static_cast<int>(result_.output_ids.size()) == max_tokens_) {
    Finish(GenerateResult::StopReason::kMaxTokens);
    return;
  }
  next_ = next;
}

void Sequence::Finish(GenerateResult::StopReason reason) {
  result_.stop_reason = reason;
  done_ = true;
}

GenerateResult Sequence::TakeResult() {
  std::string tail = decoder_.Flush();
  result_.text += tail;
  if (on_token_ && !tail.empty()) on_token_(-1, tail);
  result_.stats.generated_tokens = static_cast<int>(result_.output_ids.size());
  if (!prefilling()) {
    result_.stats.decode_seconds =
        SecondsBetween(decode_start_, std::chrono::steady_clock::now());
  }
  return std::move(result_);
}

}  // namespace odmoe
