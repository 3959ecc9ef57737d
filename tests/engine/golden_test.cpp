// The reference engine against golden data computed with Hugging Face
// transformers (MixtralForCausalLM, float32) on the same weights
// (tests/data/golden/tiny_mixtral_golden.json, made by
// scripts/make_tiny_model.py): greedy tokens exact, top-5 logits within a
// tolerance, experts selected per layer per position identical.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>

#include "backend_registry.h"
#include "engine/reference_engine.h"
#include "golden_steps.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace odmoe {
namespace {

using nlohmann::json;

const json& Golden() {
  static const json golden = [] {
    std::ifstream in(test::SourcePath("tests/data/golden/tiny_mixtral_golden.json"));
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return golden;
}

ReferenceEngine& Engine() {
  static std::unique_ptr<ReferenceEngine> engine = [] {
    auto e = ReferenceEngine::Create(test::SourcePath(Golden()["model_file"].get<std::string>()),
                                     EngineOptions{});
    REQUIRE(e.ok());
    return std::move(e).value();
  }();
  return *engine;
}

// Logits of a float32 model with F16 weights against the same computation in
// PyTorch: summation order differs, so allow a small absolute + relative error.
constexpr double kLogitAbsTol = 1e-4;
constexpr double kLogitRelTol = 1e-5;

}  // namespace

TEST_CASE("golden: at least 8 cases over the shipped model", "[golden]") {
  REQUIRE(Golden()["cases"].size() >= 8);
  const ModelConfig& c = Engine().model().config();
  CHECK(Golden()["n_layer"].get<int>() == c.n_layer);
  CHECK(Golden()["n_expert"].get<int>() == c.n_expert);
  CHECK(Golden()["top_k"].get<int>() == c.n_expert_used);
}

TEST_CASE("golden: tokenizer ids of every prompt are exact", "[golden]") {
  for (const json& gc : Golden()["cases"]) {
    auto ids = Engine().tokenizer().Encode(gc["prompt"].get<std::string>());
    REQUIRE(ids.ok());
    CHECK(*ids == gc["prompt_ids"].get<std::vector<int32_t>>());
  }
}

TEST_CASE("golden: greedy tokens are exact and routing is identical", "[golden]") {
  const int k = Engine().model().config().n_expert_used;
  for (const json& gc : Golden()["cases"]) {
    INFO("prompt: " << gc["prompt"].get<std::string>());
    const auto expected = gc["greedy_ids"].get<std::vector<int32_t>>();
    GenerateRequest req;
    req.prompt_ids = gc["prompt_ids"].get<std::vector<int32_t>>();
    req.max_tokens = static_cast<int>(expected.size());
    req.ignore_eos = true;
    req.record_routing = true;
    auto r = Engine().Generate(req);
    REQUIRE(r.ok());
    CHECK(r->output_ids == expected);

    const json& experts = gc["experts"];
    REQUIRE(r->routing.size() == experts.size());
    int mismatches = 0;
    for (size_t pos = 0; pos < experts.size(); ++pos) {
      for (size_t l = 0; l < experts[pos].size(); ++l) {
        const auto want = experts[pos][l].get<std::vector<int32_t>>();
        const std::vector<int32_t> got(r->routing[pos].begin() + l * k,
                                       r->routing[pos].begin() + (l + 1) * k);
        if (got != want) {
          ++mismatches;
          UNSCOPED_INFO("position " << pos << " layer " << l);
        }
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("golden: top-5 logits of every step are within tolerance", "[golden]") {
  const ModelFile& model = Engine().model();
  test::LocalForward local = test::MakeLocalForward(model);
  test::LogitTolerance tol{kLogitAbsTol, kLogitRelTol};
  for (const json& gc : Golden()["cases"]) {
    test::ReplayGreedySteps(*local.tf, *local.experts, gc, [&](size_t step, const std::vector<float>& l) {
      for (const json& pair : gc["top5"][step]) {
        INFO("token " << pair[0].get<int>());
        tol.Check(l[pair[0].get<size_t>()], pair[1].get<double>());
      }
    });
  }
  WARN("largest top-5 logit difference from transformers: " << tol.worst);
}

}  // namespace odmoe

namespace odmoe {

TEST_CASE("golden: both expert layouts of the 2-layer model match transformers", "[golden]") {
  std::ifstream in(test::SourcePath("tests/data/golden/tiny_mixtral_2layer_golden.json"));
  REQUIRE(in.good());
  const nlohmann::json golden = nlohmann::json::parse(in);
  REQUIRE(golden["model_files"].size() == 2);
  for (const auto& file : golden["model_files"]) {
    INFO("model " << file.get<std::string>());
    auto engine = ReferenceEngine::Create(test::SourcePath(file.get<std::string>()), {});
    REQUIRE(engine.ok());
    const int k = (*engine)->model().config().n_expert_used;
    for (const auto& gc : golden["cases"]) {
      GenerateRequest req;
      req.prompt_ids = gc["prompt_ids"].get<std::vector<int32_t>>();
      req.max_tokens = static_cast<int>(gc["greedy_ids"].size());
      req.ignore_eos = true;
      req.record_routing = true;
      auto r = (*engine)->Generate(req);
      REQUIRE(r.ok());
      CHECK(r->output_ids == gc["greedy_ids"].get<std::vector<int32_t>>());
      REQUIRE(r->routing.size() == gc["experts"].size());
      for (size_t pos = 0; pos < r->routing.size(); ++pos) {
        for (size_t l = 0; l < gc["experts"][pos].size(); ++l) {
          const std::vector<int32_t> got(r->routing[pos].begin() + l * k,
                                         r->routing[pos].begin() + (l + 1) * k);
          CHECK(got == gc["experts"][pos][l].get<std::vector<int32_t>>());
        }
      }
    }
  }
}

}  // namespace odmoe
