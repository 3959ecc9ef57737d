// The engine's results do not depend on how tokens are batched, and the two
// ways GGUF files store experts give identical results.
#include <catch2/catch.hpp>
#include <cstring>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "test_paths.h"

namespace odmoe {
namespace {

struct Run {
  std::vector<float> logits;
  std::vector<TokenRouting> routing;
};

Run Forward(const std::string& path, const std::vector<int32_t>& tokens, int n_batch,
            const std::string& backend_name = "cpu",
            int64_t piece_rows = LocalExpertExecutor::kExpertPieceRows) {
  auto model = ModelFile::Open(path);
  REQUIRE(model.ok());
  auto backend = CreateBackend(backend_name);
  REQUIRE(backend.ok());
  Transformer::Options opt;
  opt.n_batch = n_batch;
  auto tf = Transformer::Create(**model, **backend, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(**model, **backend, n_batch, piece_rows);
  REQUIRE(experts.ok());
  for (int32_t t : tokens) REQUIRE(t < (*model)->config().n_vocab);
  Run run;
  const absl::Status status = (*tf)->Forward(tokens, 0, **experts, &run.logits, &run.routing);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return run;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// 23 token ids spread over the vocabulary (the Mixtral models here have >= 2000).
const std::vector<int32_t> kTokens = {1,   415, 1210, 302,  264, 1215, 349, 264, 1263, 298, 3,  17,
                                      900, 12,  44,   1500, 7,   8,    9,   10,  11,   250, 251};

}  // namespace

TEST_CASE("engine: prefill batch size does not change a single bit", "[engine]") {
  // n_batch 1 takes every one-row path (DeepSeek-V2's heads in one
  // MatMulById, the routing left on the backend); the others the many-row ones.
  for (const char* file : {"models/tiny-mixtral-f16.gguf", "tests/data/arch/tiny-deepseek2.gguf",
                           "tests/data/arch/tiny-deepseek2-qlora.gguf",
                           "tests/data/arch/tiny-qwen3moe.gguf",
                           "tests/data/arch/tiny-deepseek3.gguf"}) {
    const std::string model = test::SourcePath(file);
    std::vector<int32_t> tokens;  // the arch models' vocabularies have 1024 entries
    for (int32_t t : kTokens) tokens.push_back(t % 1000);
    const Run whole = Forward(model, tokens, 64);
    for (int n_batch : {1, 3, 7, 16}) {
      INFO(file << ", n_batch " << n_batch);
      const Run split = Forward(model, tokens, n_batch);
      CHECK(BitEqual(whole.logits, split.logits));
      CHECK(whole.routing == split.routing);
    }
  }
}

TEST_CASE("engine: an expert's rows taken a few at a time do not change a single bit",
          "[engine]") {
  const std::string model = test::SourcePath("models/tiny-mixtral-f16.gguf");
  const Run whole = Forward(model, kTokens, 64);
  for (int64_t piece : {1, 3, 5}) {
    INFO("piece " << piece);
    const Run split = Forward(model, kTokens, 64, "cpu", piece);
    CHECK(BitEqual(whole.logits, split.logits));
    CHECK(whole.routing == split.routing);
  }
  auto m = ModelFile::Open(model);
  REQUIRE(m.ok());
  auto be = CreateBackend("cpu");
  REQUIRE(be.ok());
  CHECK(!LocalExpertExecutor::Create(**m, **be, 8, 0).ok());
}

TEST_CASE("engine: thread count does not change a single bit", "[engine]") {
  const std::string model = test::SourcePath("models/tiny-mixtral-f16.gguf");
  const Run one = Forward(model, kTokens, 8, "cpu:1");
  const Run three = Forward(model, kTokens, 8, "cpu:3");
  CHECK(BitEqual(one.logits, three.logits));
}

TEST_CASE("engine: stacked and per-expert layouts give identical results", "[engine]") {
  const Run stacked = Forward(test::SourcePath("tests/data/tiny-mixtral-2layer.gguf"), kTokens, 5);
  const Run legacy =
      Forward(test::SourcePath("tests/data/tiny-mixtral-2layer-legacy.gguf"), kTokens, 5);
  CHECK(BitEqual(stacked.logits, legacy.logits));
  CHECK(stacked.routing == legacy.routing);
}

TEST_CASE("engine: out-of-vocabulary tokens and context overflow are errors", "[engine]") {
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  Transformer::Options opt;
  opt.n_ctx = 8;
  opt.n_batch = 4;
  auto tf = Transformer::Create(**model, **backend, opt);
  REQUIRE(tf.ok());
  auto experts = LocalExpertExecutor::Create(**model, **backend, 4);
  REQUIRE(experts.ok());
  std::vector<float> logits;
  const std::vector<int32_t> bad = {1, (*model)->config().n_vocab};
  CHECK((*tf)->Forward(bad, 0, **experts, &logits, nullptr).code() ==
        absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> nine(9, 1);
  CHECK((*tf)->Forward(nine, 0, **experts, &logits, nullptr).code() ==
        absl::StatusCode::kOutOfRange);
  CHECK((*tf)->Forward(std::vector<int32_t>{1}, 8, **experts, &logits, nullptr).code() ==
        absl::StatusCode::kOutOfRange);
}

TEST_CASE("engine: routing plans reject bad expert ids", "[engine]") {
  const std::vector<float> w = {0.5f, 0.5f};
  CHECK(RoutingPlan::Build(std::vector<int32_t>{0, 8}, w, 2, 8).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(RoutingPlan::Build(std::vector<int32_t>{-1, 2}, w, 2, 8).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(RoutingPlan::Build(std::vector<int32_t>{3, 3}, w, 2, 8).status().code() ==
        absl::StatusCode::kInvalidArgument);
  const std::vector<float> w4 = {0.6f, 0.4f, 0.7f, 0.3f};
  auto plan = RoutingPlan::Build(std::vector<int32_t>{5, 1, 1, 7}, w4, 2, 8);
  REQUIRE(plan.ok());
  REQUIRE(plan->experts.size() == 3);
  CHECK(plan->experts[0].expert == 1);
  CHECK(plan->experts[0].rows == std::vector<int32_t>{0, 1});
  CHECK(plan->experts[0].weights == std::vector<float>{0.4f, 0.7f});
  CHECK(plan->experts[0].slots == std::vector<int32_t>{1, 2});
  CHECK(plan->experts[1].expert == 5);
  CHECK(plan->experts[1].slots == std::vector<int32_t>{0});
  CHECK(plan->experts[2].expert == 7);
  CHECK(plan->experts[2].slots == std::vector<int32_t>{3});
}

TEST_CASE("engine: a one-row batch reads its scales on the backend with the same bits",
          "[engine]") {
  // The transformer hands the executor RouterTopK's weights where they are
  // (plan.backend_weights); a one-row batch then uploads nothing.
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  auto experts = LocalExpertExecutor::Create(**model, **backend, 4);
  REQUIRE(experts.ok());
  const int layer = c.n_layer - 1;
  std::vector<float> x(static_cast<size_t>(c.n_embd));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  const std::vector<int32_t> ids = {c.n_expert - 1, 0};
  const std::vector<float> weights = {0.625f, 0.375f};
  auto run = [&](const float* backend_weights, const Backend* on) {
    auto plan = RoutingPlan::Build(ids, weights, 2, c.n_expert);
    REQUIRE(plan.ok());
    plan->backend_weights = backend_weights;
    plan->weights_backend = on;
    std::vector<float> out(x.size(), 1e30f);
    const absl::Status st = (*experts)->Run(layer, ConstMat(x.data(), 1, c.n_embd), *plan,
                                            Mat{out.data(), 1, c.n_embd});
    INFO(st.ToString());
    REQUIRE(st.ok());
    return out;
  };
  const std::vector<float> uploaded = run(nullptr, nullptr);
  CHECK(BitEqual(run(weights.data(), backend->get()), uploaded));
  auto other = CreateBackend("cpu");
  REQUIRE(other.ok());
  CHECK(BitEqual(run(weights.data(), other->get()), uploaded));  // not its backend: uploads
  // A plan whose rows do not fit one row is refused, not read past.
  auto bad = RoutingPlan::Build(std::vector<int32_t>{1, 2, 3, 4}, std::vector<float>(4, 0.5f), 2,
                                c.n_expert);
  REQUIRE(bad.ok());
  bad->backend_weights = weights.data();
  bad->weights_backend = backend->get();
  std::vector<float> out(x.size());
  CHECK((*experts)
            ->Run(layer, ConstMat(x.data(), 1, c.n_embd), *bad, Mat{out.data(), 1, c.n_embd})
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace odmoe
