// One generation (prompt -> tokens) on a Transformer and an ExpertExecutor:
// the loop shared by the single-process engine and the cluster's main node,
// so both sample, stop and count exactly alike. Hooks let the main node do its
// per-iteration work (shadow alignment, hints) at the right moments.
//
//   GenerationHooks hooks;
//   hooks.before_decode = [&](int n, int32_t token, int pos) { ...; return absl::OkStatus(); };
//   ODMOE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, PreparePrompt(req, tok, tf.n_ctx()));
//   ODMOE_ASSIGN_OR_RETURN(GenerateResult r, RunGeneration(tf, experts, tok, req, ids, cb, hooks));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/expert_executor.h"
#include "engine/sampler.h"
#include "engine/scoring.h"
#include "engine/transformer.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {

/// A generation's request. Its scalar fields (max_tokens, sampling, ...) are
/// declared with their bounds in request_fields.h, where every transport
/// reads and checks them.
struct GenerateRequest {
  std::string prompt;
  std::vector<int32_t> prompt_ids;  // used instead of `prompt` when non-empty
  /// How `prompt` is tokenized (a rendered chat prompt: special tokens parsed,
  /// no second BOS).
  Tokenizer::EncodeOptions encode;
  int max_tokens = 64;
  SamplingParams sampling;
  bool ignore_eos = false;  // keep generating past EOS (it is a token like others)
  /// EOS (unless ignored) and stop_token_ids may not come before this many
  /// tokens were generated (max_tokens still ends the generation).
  int min_tokens = 0;
  /// Tokens that end the generation as EOS does (StopReason::kStopToken;
  /// not part of the output).
  std::vector<int32_t> stop_token_ids = {};
  /// GBNF (grammar/grammar.h) every generated token must keep the output a
  /// prefix of (structured output, a required tool call); empty: none. The
  /// end-of-sequence token is allowed once the output is a whole match.
  std::string grammar;
  bool record_routing = false;  // fill GenerateResult::routing
  /// -1: none. 0..kMaxScoreTopN: fill GenerateResult::logprobs with each
  /// generated token's log-probability and this many alternatives.
  int logprobs = -1;
};

struct GenerateStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  double prefill_seconds = 0;  // prompt forward, including the first token's logits
  double decode_seconds = 0;   // forwards of generated tokens
  double ttft_seconds = 0;     // request start to first token
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  enum class StopReason {
    kMaxTokens,
    kEos,
    kStopped,    // a stop sequence (GenerationHooks::should_stop)
    kStopToken,  // one of GenerateRequest::stop_token_ids
  } stop_reason = StopReason::kMaxTokens;
  /// When requested: the experts of every layer for every position that went
  /// through the model (prompt, then each generated token but the last).
  std::vector<TokenRouting> routing;
  /// When requested: entry i scores output_ids[i] against the logits it was
  /// sampled from (ScoreLogitsRow: the model's distribution, before
  /// the sampling chain: bias, penalties, bans, a constraint, temperature,
  /// cuts), with the top-N alternatives.
  std::vector<RowScore> logprobs;
  /// When logprobs were requested and generation ended with the
  /// end-of-sequence token: its score (it is not in output_ids). Completions
  /// with `echo` list it, as evaluation harnesses expect one scored token
  /// after the prompt when they ask for one.
  std::optional<RowScore> eos_logprob;
  GenerateStats stats;
};

/// Called once per generated token with its id and the text it completes
/// (possibly empty while a UTF-8 sequence is incomplete); at the end, if
/// bytes of an incomplete sequence remain, once more with id -1 and their
/// replacement text.
using GenerationCallback = std::function<void(int32_t id, std::string_view text)>;

/// "max_tokens" | "eos" | "stop" | "stop_token" (the HTTP finish_reason of
/// the last three is "stop").
const char* StopReasonName(GenerateResult::StopReason reason);

struct GenerationHooks {
  /// Before the prompt's forward (prefill).
  std::function<absl::Status(const std::vector<int32_t>& prompt_ids)> before_prefill;
  /// Before decode iteration n >= 1: the forward of `token` at position `pos`.
  std::function<absl::Status(int n, int32_t token, int pos)> before_decode;
  /// After each generated token (and its callback): true ends the
  /// generation there, successfully (StopReason::kStopped: a stop sequence).
  std::function<bool()> should_stop;
  /// With GenerateRequest::logprobs >= 0: each generated token's scores,
  /// right before its GenerationCallback (for streaming them).
  std::function<void(const RowScore&)> on_logprobs;
};

/// Every check of a request, in one place: its fields against their bounds
/// (ValidateRequestFields), its grammar ("grammar: grammar line 2 column 5:
/// ..."), then the prompt: not empty ("prompt: must not be
/// empty"), its token ids in the vocabulary, or its text tokenized
/// (request.encode); the sampling's token ids (logit_bias, stop_token_ids)
/// in the vocabulary; then it and max_tokens within the context
/// (OUT_OF_RANGE, naming both). INVALID_ARGUMENT "<field>: ..." otherwise.
/// Returns the prompt's token ids.
absl::StatusOr<std::vector<int32_t>> PreparePrompt(const GenerateRequest& request,
                                                   const Tokenizer& tokenizer, int n_ctx);

/// Runs the prompt and up to max_tokens sampled tokens (from position 0).
absl::StatusOr<GenerateResult> RunGeneration(Transformer& transformer, ExpertExecutor& experts,
                                             const Tokenizer& tokenizer,
                                             const GenerateRequest& request,
                                             std::vector<int32_t> prompt_ids,
                                             const GenerationCallback& on_token,
                                             const GenerationHooks& hooks = {});

}  // namespace odmoe
