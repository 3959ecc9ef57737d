#include "engine/generation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/request_fields.h"
#include "engine/sequence.h"
#include "grammar/grammar.h"
#include "util/status_macros.h"

namespace odmoe {

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
    case GenerateResult::StopReason::kStopToken:
      return "stop_token";
    case GenerateResult::StopReason::kMaxTokens:
      break;
  }
  return "max_tokens";
}

absl::StatusOr<std::vector<int32_t>> PreparePrompt(const GenerateRequest& request,
                                                   const Tokenizer& tokenizer, int n_ctx) {
  ODMOE_RETURN_IF_ERROR(ValidateRequestFields(request));
  if (!request.grammar.empty()) {
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnfCached(request.grammar);
    if (!grammar.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("grammar: ", grammar.status().message()));
    }
  }
  if (request.prompt.empty() && request.prompt_ids.empty()) {
    return absl::InvalidArgumentError("prompt: must not be empty");
  }
  std::vector<int32_t> ids;
  if (!request.prompt_ids.empty()) {
    ids = request.prompt_ids;
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer.n_vocab()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "prompt: token id %d outside the vocabulary [0, %d)", id, tokenizer.n_vocab()));
      }
    }
  } else {
    absl::StatusOr<std::vector<int32_t>> encoded = tokenizer.Encode(request.prompt, request.encode);
    if (!encoded.ok()) {
      return absl::Status(encoded.status().code(),
                          absl::StrCat("prompt: ", encoded.status().message()));
    }
    ids = std::move(*encoded);
  }
  if (ids.empty()) return absl::InvalidArgumentError("prompt: has no tokens");
  // The sampling's token ids (their other checks: ValidateRequestFields).
  auto outside = [&tokenizer](const char* field, int32_t id) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: token id %d outside the vocabulary [0, %d)", field, id, tokenizer.n_vocab()));
  };
  for (const auto& [id, bias] : request.sampling.logit_bias) {
    if (id >= tokenizer.n_vocab()) return outside("logit_bias", id);
  }
  for (int32_t id : request.stop_token_ids) {
    if (id >= tokenizer.n_vocab()) return outside("stop_token_ids", id);
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
  Sequence seq(tokenizer, request, std::move(prompt_ids), on_token, hooks.should_stop,
               hooks.on_logprobs);
  std::vector<float> logits;
  const std::vector<int32_t>& prompt = seq.result().prompt_ids;
  if (hooks.before_prefill) ODMOE_RETURN_IF_ERROR(hooks.before_prefill(prompt));
  ODMOE_RETURN_IF_ERROR(transformer.Forward(prompt, 0, experts, &logits, seq.routing()));
  seq.Consumed(static_cast<int64_t>(prompt.size()), logits);
  for (int n = 1; !seq.done(); ++n) {
    const int32_t token = seq.Pending(1).front();
    const int pos = seq.pos();
    if (hooks.before_decode) ODMOE_RETURN_IF_ERROR(hooks.before_decode(n, token, pos));
    const int32_t row[1] = {token};
    ODMOE_RETURN_IF_ERROR(transformer.Forward(row, pos, experts, &logits, seq.routing()));
    seq.Consumed(1, logits);
  }
  return seq.TakeResult();
}

}  // namespace odmoe
