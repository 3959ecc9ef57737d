// The single-process reference engine: a whole MoE model in one process on
// one backend. odmoe-run is a thin CLI over it, and the cluster's output is
// checked against it token for token.
//
//   EngineOptions opt{.backend = "cpu"};
//   ODMOE_ASSIGN_OR_RETURN(auto engine, ReferenceEngine::Create("model.gguf", opt));
//   GenerateRequest req{.prompt = "Once upon a time", .max_tokens = 32};
//   ODMOE_ASSIGN_OR_RETURN(GenerateResult r, engine->Generate(req,
//       [](int32_t id, std::string_view text) { std::cout << text << std::flush; }));
//   // r.output_ids, r.stats.decode_tokens_per_second(), r.routing ...
//   ODMOE_ASSIGN_OR_RETURN(ScoreResult s, engine->Score(r.prompt_ids, {}));
//   // s.next_logprobs[i] = log p(prompt_ids[i + 1] | prompt_ids[0 .. i])
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "engine/generation.h"
#include "engine/local_expert_executor.h"
#include "engine/sampler.h"
#include "engine/scoring.h"
#include "engine/transformer.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {

struct EngineOptions {
  std::string backend = "cpu";  // registry name: "cpu", "cpu:2", "cuda:0"
  int n_ctx = 0;                // 0 = min(training context, 4096)
  int n_batch = 64;             // prefill chunk
  int n_seq = 1;                // KV slots: sequences ScoreSequences takes at once
};

class ReferenceEngine {
 public:
  using TokenCallback = GenerationCallback;

  static absl::StatusOr<std::unique_ptr<ReferenceEngine>> Create(const std::string& model_path,
                                                                 const EngineOptions& options);

  const ModelFile& model() const { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Backend& backend() const { return *backend_; }
  int n_ctx() const { return transformer_->n_ctx(); }

  /// INVALID_ARGUMENT for bad sampling parameters or max_tokens < 1,
  /// OUT_OF_RANGE when prompt + max_tokens exceeds the context.
  absl::StatusOr<GenerateResult> Generate(const GenerateRequest& request,
                                          const TokenCallback& on_token = nullptr);

  /// Teacher-forced scores of `tokens` (engine/scoring.h): the logits are
  /// those Generate computes. INVALID_ARGUMENT for a request that does not
  /// fit (ValidateScoreRequest).
  absl::StatusOr<ScoreResult> Score(std::span<const int32_t> tokens, const ScoreOptions& options);
  /// Several sequences scored in one forward batch (engine/scoring.h's
  /// ScoreSequences): at most n_seq of them, n_batch tokens in all.
  absl::StatusOr<std::vector<ScoreResult>> ScoreSequences(
      std::span<const std::span<const int32_t>> sequences, const ScoreOptions& options);

 private:
  ReferenceEngine() = default;
  std::unique_ptr<ModelFile> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<LocalExpertExecutor> experts_;
};

}  // namespace odmoe
