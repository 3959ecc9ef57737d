// odmoe-synth's sigmoid-routed models (GLM-4.5, MiniMax-M2, DeepSeek-V3's
// routing on deepseek2): at small widths they open with their routing keys,
// correction biases, partial RoPE and head layouts, and generate; the presets
// have the real models' sizes.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "engine/reference_engine.h"
#include "model/model_file.h"
#include "model/synth_model.h"

namespace odmoe {
namespace {

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_synth_sigmoid_" + name)).string();
}

/// A small model of `preset`'s architecture and routing.
SynthSpec SmallOf(const std::string& preset) {
  SynthSpec s = SynthSpec::Preset(preset).value();
  s.n_layer = 3;
  s.n_embd = 64;
  s.n_ff = 32;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_vocab = 300;
  s.n_ctx = 64;
  if (s.arch == "deepseek2") {
    s.n_head = 4;
    s.kv_lora_rank = 32;
    s.qk_nope = 16;
    s.qk_rope = 8;
    s.v_head = 16;
    s.n_ff_shared = 64;
    s.n_ff_dense = 96;
    s.n_group = 4;
    s.n_group_used = 2;
  } else {
    s.n_head = 6;  // 6 heads of 16 over 64: the heads do not split the hidden size
    s.n_head_kv = 2;
    s.head_dim = 16;
    s.rope_dims = 8;
    s.n_ff_shared = s.n_ff_shared > 0 ? 32 : 0;
    s.n_ff_dense = 96;
  }
  return s;
}

}  // namespace

TEST_CASE("synth: the sigmoid-routed architectures open with their routing and generate",
          "[tools][arch]") {
  for (const char* preset : {"glm-4.5-air", "minimax-m2", "deepseek-v3-lite"}) {
    INFO(preset);
    const SynthSpec s = SmallOf(preset);
    REQUIRE(ValidateSynthSpec(s).ok());
    const std::string path = Temp(std::string(preset) + ".gguf");
    REQUIRE(WriteSynthModel(s, path).ok());
    auto model = ModelFile::Open(path);
    INFO((model.ok() ? "" : std::string(model.status().message())));
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.arch == s.arch);
    CHECK(c.gating.score == RouterScore::kSigmoid);
    CHECK(c.gating.normalize);
    CHECK(c.router_selection_bias);
    CHECK(c.gating.group_limited() == (s.arch == "deepseek2"));
    CHECK(c.gating.scale == (s.routed_scale > 0 ? s.routed_scale : 1.0f));
    if (s.arch != "deepseek2") {
      CHECK(c.q_width() == 96);
      CHECK(c.rope_dims == 8);
      CHECK(c.qk_norm == (s.arch == "minimax-m2" ? QkNorm::kFull : QkNorm::kNone));
      CHECK(c.attn_bias == (s.arch == "glm4moe"));
      CHECK(c.n_dense_leading == (s.arch == "glm4moe" ? 1 : 0));
      CHECK(c.n_ff_shared == (s.arch == "glm4moe" ? 32 : 0));
    }
    // Generate, and see each routed layer's k experts distinct and, with
    // groups, inside at most n_group_used groups.
    auto engine = ReferenceEngine::Create(path, {});
    REQUIRE(engine.ok());
    GenerateRequest req;
    req.prompt = "any text at all";
    req.max_tokens = 6;
    req.ignore_eos = req.record_routing = true;
    auto r = (*engine)->Generate(req);
    REQUIRE(r.ok());
    CHECK(r->output_ids.size() == 6);
    const int k = c.n_expert_used, per_group = c.n_expert / c.gating.n_group;
    for (const TokenRouting& t : r->routing) {
      for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
        std::set<int32_t> ids(t.begin() + l * k, t.begin() + (l + 1) * k), groups;
        CHECK(ids.size() == static_cast<size_t>(k));
        for (int32_t e : ids) groups.insert(e / per_group);
        CHECK(static_cast<int>(groups.size()) <= c.gating.n_group_used);
      }
    }
    std::filesystem::remove(path);
  }
}

TEST_CASE("synth: the sigmoid-routed presets are sized like the real models", "[tools][arch]") {
  // GLM-4.5-Air: ~107 G parameters without its NextN layer (F16: 2 bytes each).
  const uint64_t glm = SynthModelBytes(SynthSpec::Preset("glm-4.5-air").value()).value();
  CHECK(glm > 205'000'000'000ull);
  CHECK(glm < 216'000'000'000ull);
  // MiniMax-M2: ~229 G parameters.
  const uint64_t minimax = SynthModelBytes(SynthSpec::Preset("minimax-m2").value()).value();
  CHECK(minimax > 450'000'000'000ull);
  CHECK(minimax < 462'000'000'000ull);
  // DeepSeek-V2-Lite's shapes: its size; 8 groups of 8 experts keeping 4.
  const SynthSpec v3 = SynthSpec::Preset("deepseek-v3-lite").value();
  CHECK(SynthModelBytes(v3).value() >
        SynthModelBytes(SynthSpec::Preset("deepseek2").value()).value());
  CHECK(v3.n_group * 8 == v3.n_expert);
  SynthSpec bad = v3;
  bad.n_group = 3;  // 64 experts do not split into 3 groups (2 of them kept)
  bad.n_group_used = 2;
  CHECK(std::string(ValidateSynthSpec(bad).message()).find("groups") == 0);
}

}  // namespace odmoe
