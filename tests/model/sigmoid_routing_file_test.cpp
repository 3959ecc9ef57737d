// Sigmoid routing's keys and tensors in a file (DeepSeek-V3, GLM-4.5,
// MiniMax-M2): what model_file.cpp reads from them, and the clear errors for
// files it cannot run (a key or tensor named, never a crash).
#include <catch2/catch.hpp>
#include <string>

#include "model/model_file.h"
#include "modified_model.h"
#include "test_paths.h"

namespace odmoe {
namespace {

std::string OpenChanged(const std::string& fixture, const std::string& key, GgufValue value,
                        const std::string& drop = "") {
  return test::OpenModifiedModel(test::SourcePath(fixture), key, value, drop);
}

constexpr char kDeepSeek3[] = "tests/data/arch/tiny-deepseek3.gguf";
constexpr char kGlm[] = "tests/data/arch/tiny-glm4moe.gguf";

}  // namespace

TEST_CASE("model: sigmoid routing reads its groups and correction bias", "[model]") {
  auto m = ModelFile::Open(test::SourcePath(kDeepSeek3));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK(c.gating.score == RouterScore::kSigmoid);
  CHECK(c.gating.n_group == 4);
  CHECK(c.gating.n_group_used == 2);
  CHECK(c.gating.group_limited());
  CHECK(c.router_selection_bias);
  CHECK((*m)->layer(0).exp_probs_b.data == nullptr);  // the dense layer
  CHECK((*m)->layer(1).exp_probs_b.ne[0] == 16);
  // All groups kept: no limit; one group: none.
  CHECK(OpenChanged(kDeepSeek3, "deepseek2.expert_group_used_count", GgufValue::U32(4)).empty());
  CHECK(OpenChanged(kDeepSeek3, "deepseek2.expert_group_count", GgufValue::U32(1)).empty());
}

TEST_CASE("model: sigmoid routing a file cannot run is a clear error", "[model]") {
  CHECK_THAT(OpenChanged(kDeepSeek3, "deepseek2.expert_gating_func", GgufValue::U32(3)),
             Catch::Contains("deepseek2.expert_gating_func' = 3"));
  // Groups that do not split 16 experts evenly, or hold one expert each.
  CHECK_THAT(OpenChanged(kDeepSeek3, "deepseek2.expert_group_count", GgufValue::U32(3)),
             Catch::Contains("deepseek2.expert_group_count' = 3"));
  CHECK_THAT(OpenChanged(kDeepSeek3, "deepseek2.expert_group_count", GgufValue::U32(16)),
             Catch::Contains("deepseek2.expert_group_count' = 16"));
  // No group kept: fewer experts than the top-4.
  CHECK_THAT(OpenChanged(kDeepSeek3, "deepseek2.expert_group_used_count", GgufValue::U32(0)),
             Catch::Contains("deepseek2.expert_group_used_count' = 0"));
  // DeepSeek-V2's group_limited_greedy (a softmax over groups) is refused.
  CHECK_THAT(OpenChanged(kDeepSeek3, "deepseek2.expert_gating_func", GgufValue::U32(1)),
             Catch::Contains("with a softmax"));
  // A layer without its correction bias.
  CHECK_THAT(OpenChanged(kDeepSeek3, "", GgufValue(), "blk.2.exp_probs_b.bias"),
             Catch::Contains("blk.2.exp_probs_b.bias"));
  // More NextN layers than the file has.
  CHECK_THAT(OpenChanged(kGlm, "glm4moe.nextn_predict_layers", GgufValue::U32(4)),
             Catch::Contains("glm4moe.nextn_predict_layers"));
}

TEST_CASE("model: GLM-4.5's NextN layer is in the file but not in the model", "[model]") {
  auto m = ModelFile::Open(test::SourcePath(kGlm));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK(c.n_layer == 3);
  CHECK(c.n_layer_nextn == 1);
  CHECK((*m)->gguf().HasTensor("blk.3.nextn.eh_proj.weight"));
  CHECK(c.qk_norm == QkNorm::kNone);  // GLM-4.5-Air: use_qk_norm false
  CHECK(c.rope_dims == 16);
  CHECK(c.attn_bias);
}

}  // namespace odmoe
