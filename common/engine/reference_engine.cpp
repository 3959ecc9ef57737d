#include "engine/reference_engine.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "util/logging.h"
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

absl::StatusOr<std::unique_ptr<ReferenceEngine>> ReferenceEngine::Create(
    const std::string& model_path, const EngineOptions& options) {
  std::unique_ptr<ReferenceEngine> e(new ReferenceEngine());
  ODMOE_ASSIGN_OR_RETURN(e->model_, ModelFile::Open(model_path));
  ODMOE_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::FromGguf(e->model_->gguf()));
  if (e->tokenizer_->n_vocab() != e->model_->config().n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tokenizer has %d tokens but token_embd has %d rows", model_path,
                        e->tokenizer_->n_vocab(), e->model_->config().n_vocab));
  }
  const int n_ctx_train = e->model_->config().n_ctx_train;
  if (options.n_ctx > n_ctx_train) {
    ODMOE_LOG_WARN(
        "context of {} tokens is longer than the {} the model was trained with; "
        "quality past that is not guaranteed",
        options.n_ctx, n_ctx_train);
  }
  ODMOE_ASSIGN_OR_RETURN(e->backend_, CreateBackend(options.backend));
  Transformer::Options topt;
  topt.n_ctx = options.n_ctx;
  topt.n_batch = options.n_batch;
  ODMOE_ASSIGN_OR_RETURN(e->transformer_, Transformer::Create(*e->model_, *e->backend_, topt));
  ODMOE_ASSIGN_OR_RETURN(e->experts_, LocalExpertExecutor::Create(*e->model_, *e->backend_,
                                                                  e->transformer_->n_batch()));
  return e;
}

absl::StatusOr<GenerateResult> ReferenceEngine::Generate(const GenerateRequest& request,
                                                         const TokenCallback& on_token) {
  const auto t0 = std::chrono::steady_clock::now();
  ODMOE_RETURN_IF_ERROR(request.sampling.Validate());
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_tokens must be >= 1, got %d", request.max_tokens));
  }
  GenerateResult result;
  if (!request.prompt_ids.empty()) {
    result.prompt_ids = request.prompt_ids;
  } else {
    ODMOE_ASSIGN_OR_RETURN(result.prompt_ids, tokenizer_->Encode(request.prompt));
  }
  if (result.prompt_ids.empty()) {
    return absl::InvalidArgumentError("the prompt is empty and the model adds no BOS token");
  }
  const int n_prompt = static_cast<int>(result.prompt_ids.size());
  if (n_prompt >= n_ctx()) {
    return absl::OutOfRangeError(
        absl::StrFormat("the prompt has %d tokens; the context holds %d", n_prompt, n_ctx()));
  }
  if (n_prompt + request.max_tokens > n_ctx()) {
    return absl::OutOfRangeError(
        absl::StrFormat("prompt (%d tokens) + max_tokens (%d) exceeds the context of %d tokens; "
                        "at most %d new tokens fit",
                        n_prompt, request.max_tokens, n_ctx(), n_ctx() - n_prompt));
  }

  std::vector<TokenRouting>* routing = request.record_routing ? &result.routing : nullptr;
  std::vector<float> logits;
  ODMOE_RETURN_IF_ERROR(transformer_->Forward(result.prompt_ids, 0, *experts_, &logits, routing));
  result.stats.prompt_tokens = n_prompt;
  result.stats.prefill_seconds = SecondsSince(t0);

  Sampler sampler(request.sampling);
  IncrementalDecoder decoder(*tokenizer_, /*continues_text=*/true);
  const auto decode_start = std::chrono::steady_clock::now();
  int pos = n_prompt;
  for (int i = 0; i < request.max_tokens; ++i) {
    const int32_t next = sampler.Sample(logits);
    if (i == 0) result.stats.ttft_seconds = SecondsSince(t0);
    if (next == tokenizer_->eos_id() && !request.ignore_eos) {
      result.stop_reason = GenerateResult::StopReason::kEos;
      break;
    }
    result.output_ids.push_back(next);
    std::string piece = decoder.Push(next);
    result.text += piece;
    if (on_token) on_token(next, piece);
    if (i + 1 == request.max_tokens) break;
    const int32_t token[1] = {next};
    ODMOE_RETURN_IF_ERROR(transformer_->Forward(token, pos++, *experts_, &logits, routing));
  }
  std::string tail = decoder.Flush();
  result.text += tail;
  if (on_token && !tail.empty()) on_token(-1, tail);
  result.stats.generated_tokens = static_cast<int>(result.output_ids.size());
  result.stats.decode_seconds = SecondsSince(decode_start);
  return result;
}

}  // namespace odmoe
