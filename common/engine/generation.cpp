#include "engine/generation.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double GenerateStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0;
}

double GenerateStats::decode_tokens_per_second() const {
  // The first generated token comes from the prefill; each later one costs a forward.
  return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0.0;
}

const char* StopReasonName(GenerateResult::StopReason reason) {
  switch (reason) {
    case GenerateResult::StopReason::kEos:
      return "eos";
    case GenerateResult::StopReason::kStopped:
      return "stop";
    case GenerateResult::StopReason::kMaxTokens:
      break;
  }
  return "max_tokens";
}

absl::StatusOr<std::vector<int32_t>> PreparePrompt(const GenerateRequest& request,
                                                   const Tokenizer& tokenizer, int n_ctx) {
  ODMOE_RETURN_IF_ERROR(request.sampling.Validate());
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_tokens must be >= 1, got %d", request.max_tokens));
  }
  if (request.logprobs < -1 || request.logprobs > kMaxScoreTopN) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "logprobs: at most %d alternatives per token, got %d", kMaxScoreTopN, request.logprobs));
  }
  std::vector<int32_t> ids;
  if (!request.prompt_ids.empty()) {
    ids = request.prompt_ids;
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer.n_vocab()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "prompt token id %d outside the vocabulary [0, %d)", id, tokenizer.n_vocab()));
      }
    }
  } else {
    ODMOE_ASSIGN_OR_RETURN(ids, tokenizer.Encode(request.prompt));
  }
  if (ids.empty()) {
    return absl::InvalidArgumentError("the prompt is empty and the model adds no BOS token");
  }
  const int n_prompt = static_cast<int>(ids.size());
  if (n_prompt >= n_ctx) {
    return absl::OutOfRangeError(
        absl::StrFormat("the prompt has %d tokens; the context holds %d", n_prompt, n_ctx));
  }
  if (n_prompt + request.max_tokens > n_ctx) {
    return absl::OutOfRangeError(
        absl::StrFormat("prompt (%d tokens) + max_tokens (%d) exceeds the context of %d tokens; "
                        "at most %d new tokens fit",
                        n_prompt, request.max_tokens, n_ctx, n_ctx - n_prompt));
  }
  return ids;
}

absl::StatusOr<GenerateResult> RunGeneration(Transformer& transformer, ExpertExecutor& experts,
                                             const Tokenizer& tokenizer,
                                             const GenerateRequest& request,
                                             std::vector<int32_t> prompt_ids,
                                             const GenerationCallback& on_token,
                                             const GenerationHooks& hooks) {
  const auto t0 = std::chrono::steady_clock::now();
  GenerateResult result;
  result.prompt_ids = std::move(prompt_ids);
  const int n_prompt = static_cast<int>(result.prompt_ids.size());
  std::vector<TokenRouting>* routing = request.record_routing ? &result.routing : nullptr;
  std::vector<float> logits;
  if (hooks.before_prefill) ODMOE_RETURN_IF_ERROR(hooks.before_prefill(result.prompt_ids));
  ODMOE_RETURN_IF_ERROR(transformer.Forward(result.prompt_ids, 0, experts, &logits, routing));
  result.stats.prompt_tokens = n_prompt;
  result.stats.prefill_seconds = SecondsSince(t0);

  Sampler sampler(request.sampling);
  IncrementalDecoder decoder(tokenizer, /*continues_text=*/true);
  const auto decode_start = std::chrono::steady_clock::now();
  int pos = n_prompt;
  for (int i = 0; i < request.max_tokens; ++i) {
    const int32_t next = sampler.Sample(logits);
    if (i == 0) result.stats.ttft_seconds = SecondsSince(t0);
    if (next == tokenizer.eos_id() && !request.ignore_eos) {
      result.stop_reason = GenerateResult::StopReason::kEos;
      if (request.logprobs >= 0) result.eos_logprob = ScoreLogitsRow(logits, next, request.logprobs);
      break;
    }
    result.output_ids.push_back(next);
    if (request.logprobs >= 0) {
      result.logprobs.push_back(ScoreLogitsRow(logits, next, request.logprobs));
      if (hooks.on_logprobs) hooks.on_logprobs(result.logprobs.back());
    }
    std::string piece = decoder.Push(next);
    result.text += piece;
    if (on_token) on_token(next, piece);
    if (hooks.should_stop && hooks.should_stop()) {
      result.stop_reason = GenerateResult::StopReason::kStopped;
      break;
    }
    if (i + 1 == request.max_tokens) break;
    if (hooks.before_decode) ODMOE_RETURN_IF_ERROR(hooks.before_decode(i + 1, next, pos));
    const int32_t token[1] = {next};
    ODMOE_RETURN_IF_ERROR(transformer.Forward(token, pos++, experts, &logits, routing));
  }
  std::string tail = decoder.Flush();
  result.text += tail;
  if (on_token && !tail.empty()) on_token(-1, tail);
  result.stats.generated_tokens = static_cast<int>(result.output_ids.size());
  result.stats.decode_seconds = SecondsSince(decode_start);
  return result;
}

}  // namespace odmoe
