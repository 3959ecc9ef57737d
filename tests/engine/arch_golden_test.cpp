// Every architecture of the table against Hugging Face transformers: tiny
// random models of each (Qwen3-MoE, OLMoE, Qwen2-MoE, ...) made at
// development time with transformers and converted to GGUF by llama.cpp's
// converter (scripts/fixtures/make_arch_models.py; tests/data/arch/README.md).
// On each file: the tokenizer's ids of every prompt, greedy tokens exact, the
// prompt's last-position logits (whole vocabulary) and every step's top-5
// within a tolerance, the experts chosen at every layer and position
// identical, and the peer engine's (llama.cpp's) greedy tokens equal to ours.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/reference_engine.h"
#include "engine/transformer.h"
#include "golden_steps.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace odmoe {
namespace {

using nlohmann::json;

// The architectures whose fixtures must be present (a missing one fails).
const std::vector<std::string>& Archs() {
  static const std::vector<std::string> archs = {"qwen3moe", "olmoe", "qwen2moe"};
  return archs;
}

json Golden(const std::string& arch) {
  std::ifstream in(test::SourcePath("tests/data/arch/" + arch + "_golden.json"));
  REQUIRE(in.good());
  return json::parse(in);
}

std::unique_ptr<ReferenceEngine> Engine(const json& golden) {
  auto e = ReferenceEngine::Create(test::SourcePath(golden["gguf_file"].get<std::string>()),
                                   EngineOptions{});
  INFO((e.ok() ? "" : std::string(e.status().message())));
  REQUIRE(e.ok());
  return std::move(e).value();
}

// float32 models against the same computation in PyTorch: summation orders
// differ, so a small absolute + relative error.
constexpr double kLogitAbsTol = 2e-4;
constexpr double kLogitRelTol = 2e-5;

}  // namespace

TEST_CASE("arch golden: the file's configuration is transformers' configuration", "[golden][arch]") {
  for (const std::string& arch : Archs()) {
    INFO(arch);
    const json g = Golden(arch);
    auto engine = Engine(g);
    const ModelConfig& c = engine->model().config();
    const json& hf = g["hf_config"];
    CHECK(c.arch == arch);
    CHECK(c.n_layer == hf["num_hidden_layers"].get<int>());
    CHECK(c.n_embd == hf["hidden_size"].get<int>());
    CHECK(c.n_head == hf["num_attention_heads"].get<int>());
    CHECK(c.n_head_kv == hf["num_key_value_heads"].get<int>());
    CHECK(c.n_expert_used == hf["num_experts_per_tok"].get<int>());
    if (hf.contains("head_dim") && !hf["head_dim"].is_null()) {
      CHECK(c.head_dim == hf["head_dim"].get<int>());
    }
    if (hf.contains("norm_topk_prob")) {
      CHECK(c.gating.normalize == hf["norm_topk_prob"].get<bool>());
    }
    CHECK(g["cases"].size() >= 4);
  }
}

TEST_CASE("arch golden: tokenizer ids, greedy tokens and routing are exact", "[golden][arch]") {
  for (const std::string& arch : Archs()) {
    const json g = Golden(arch);
    auto engine = Engine(g);
    const int k = engine->model().config().n_expert_used;
    for (const json& gc : g["cases"]) {
      INFO(arch << " prompt: " << gc["prompt"].get<std::string>());
      auto ids = engine->tokenizer().Encode(gc["prompt"].get<std::string>());
      REQUIRE(ids.ok());
      CHECK(*ids == gc["prompt_ids"].get<std::vector<int32_t>>());

      const auto expected = gc["greedy_ids"].get<std::vector<int32_t>>();
      GenerateRequest req;
      req.prompt_ids = gc["prompt_ids"].get<std::vector<int32_t>>();
      req.max_tokens = static_cast<int>(expected.size());
      req.ignore_eos = true;
      req.record_routing = true;
      auto r = engine->Generate(req);
      REQUIRE(r.ok());
      CHECK(r->output_ids == expected);
      // The peer engine (llama.cpp) on the same file, where it ran it.
      if (g["peer"]["ran"].get<bool>()) {
        CHECK(r->output_ids == gc["peer_greedy_ids"].get<std::vector<int32_t>>());
      }

      // experts[layer][position]: the chosen ids, descending probability.
      const json& experts = gc["experts"];
      int compared = 0, mismatches = 0;
      for (size_t l = 0; l < experts.size(); ++l) {
        if (experts[l].is_null()) continue;  // a layer without experts
        for (size_t pos = 0; pos < experts[l].size() && pos < r->routing.size(); ++pos) {
          const auto want = experts[l][pos].get<std::vector<int32_t>>();
          const std::vector<int32_t> got(r->routing[pos].begin() + l * k,
                                         r->routing[pos].begin() + (l + 1) * k);
          ++compared;
          if (got != want) {
            ++mismatches;
            UNSCOPED_INFO("position " << pos << " layer " << l);
          }
        }
      }
      CHECK(compared > 0);
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("arch golden: last-position logits and every step's top-5 are within tolerance",
          "[golden][arch]") {
  for (const std::string& arch : Archs()) {
    const json g = Golden(arch);
    auto engine = Engine(g);
    const ModelFile& model = engine->model();
    auto backend = CreateBackend("cpu");
    REQUIRE(backend.ok());
    auto tf = Transformer::Create(model, **backend, {});
    REQUIRE(tf.ok());
    auto experts = LocalExpertExecutor::Create(model, **backend, (*tf)->n_batch());
    REQUIRE(experts.ok());
    test::LogitTolerance tol{kLogitAbsTol, kLogitRelTol};
    for (const json& gc : g["cases"]) {
      INFO(arch << " prompt: " << gc["prompt"].get<std::string>());
      const auto last = gc["last_logits"].get<std::vector<double>>();
      REQUIRE(last.size() == static_cast<size_t>(model.config().n_vocab));
      test::ReplayGreedySteps(**tf, **experts, gc, [&](size_t step, const std::vector<float>& l) {
        if (step == 0) {  // the prompt's last position, whole vocabulary
          for (size_t i = 0; i < last.size(); ++i) tol.Check(l[i], last[i]);
        }
        for (const json& pair : gc["top5"][step]) {
          INFO("token " << pair[0].get<int>());
          tol.Check(l[pair[0].get<size_t>()], pair[1].get<double>());
        }
      });
    }
    WARN(arch << ": largest logit difference from transformers: " << tol.worst);
  }
}

}  // namespace odmoe
