#include "engine/reference_engine.h"

#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {

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
  topt.n_seq = options.n_seq;
  ODMOE_ASSIGN_OR_RETURN(e->transformer_, Transformer::Create(*e->model_, *e->backend_, topt));
  ODMOE_ASSIGN_OR_RETURN(e->experts_, LocalExpertExecutor::Create(*e->model_, *e->backend_,
                                                                  e->transformer_->n_batch()));
  return e;
}

absl::StatusOr<GenerateResult> ReferenceEngine::Generate(const GenerateRequest& request,
                                                         const TokenCallback& on_token) {
  ODMOE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_ids,
                         PreparePrompt(request, *tokenizer_, n_ctx()));
  return RunGeneration(*transformer_, *experts_, *tokenizer_, request, std::move(prompt_ids),
                       on_token);
}

absl::StatusOr<ScoreResult> ReferenceEngine::Score(std::span<const int32_t> tokens,
                                                   const ScoreOptions& options) {
  return ScoreTokens(*transformer_, *experts_, tokens, options);
}

absl::StatusOr<std::vector<ScoreResult>> ReferenceEngine::ScoreSequences(
    std::span<const std::span<const int32_t>> sequences, const ScoreOptions& options) {
  return odmoe::ScoreSequences(*transformer_, *experts_, sequences, options);
}

}  // namespace odmoe
