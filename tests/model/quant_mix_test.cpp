// The quantization mix rules (model/quant_mix.h): the type each tensor of a
// Mixtral-shaped model and of the shipped tiny model gets, per mix.
#include "model/quant_mix.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "model/model_file.h"
#include "model/model_quantizer.h"
#include "test_paths.h"

namespace odmoe {
namespace {

// Mixtral-8x7B's shapes.
ModelConfig MixtralConfig() {
  ModelConfig c;
  c.n_vocab = 32000;
  c.n_embd = 4096;
  c.n_layer = 32;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_ff = 14336;
  c.n_expert = 8;
  c.n_expert_used = 2;
  return c;
}

// Tensor name -> output type (kept tensors: "kept").
std::map<std::string, std::string> Plan(const ModelConfig& c, QuantMix mix) {
  std::map<std::string, std::string> out;
  const QuantRecipe recipe = QuantRecipe::Mix(mix);
  for (const NamedMixTensor& t : MixTensorsOf(*FindArch("llama"), c)) {
    const TypeChoice choice = ChooseType(recipe, MixModelOf(c), t.tensor);
    out[t.name] = choice.convert ? std::string(Traits(choice.type).name) : "kept";
  }
  return out;
}

std::string Blk(int l, const std::string& what) {
  return "blk." + std::to_string(l) + "." + what + ".weight";
}

// llama.cpp's "more bits" layers of 32: the first and last 4 and every third between.
bool MoreBits32(int l) { return l < 4 || l >= 28 || (l - 4) % 3 == 2; }

}  // namespace

TEST_CASE("quant mix: the table and its names", "[model][quant]") {
  const auto& mixes = QuantMixes();
  REQUIRE(mixes.size() == 20);
  std::set<uint32_t> file_types;
  for (size_t i = 0; i < mixes.size(); ++i) {
    CHECK(static_cast<size_t>(mixes[i].mix) == i);  // MixInfo indexes by the enum
    file_types.insert(mixes[i].file_type);
    const std::optional<QuantRecipe> r = ParseQuantRecipe(std::string(mixes[i].name));
    REQUIRE(r.has_value());
    CHECK(r->mix == mixes[i].mix);
    CHECK(r->Name() == std::string(mixes[i].name));
  }
  CHECK(file_types.size() == mixes.size());
  CHECK(ParseQuantRecipe("q4_k_m")->mix == QuantMix::kQ4_K_M);  // case-insensitive
  CHECK(ParseQuantRecipe("mxfp4_moe")->FileType() == 38);
  CHECK(ParseQuantRecipe("Q4_K_M")->FileType() == 15);
  CHECK(ParseQuantRecipe("q8_0")->FileType() == 7);
  CHECK_FALSE(ParseQuantRecipe("q4_k").has_value());  // a type, not a mix
  CHECK_FALSE(ParseQuantRecipe("Q7_K").has_value());
  CHECK(QuantRecipe::Pure(DType::kQ4_K).Name() == "pure q4_K");
  CHECK(QuantRecipe::Pure(DType::kQ4_K).FileType() == 15);
  CHECK(QuantRecipe::Pure(DType::kQ6_K).FileType() == 18);
  CHECK(QuantRecipe::Pure(DType::kQ8_0).FileType() == 7);
}

TEST_CASE("quant mix: the fallback table", "[model][quant]") {
  CHECK(FallbackType(DType::kQ2_K) == DType::kQ4_0);
  CHECK(FallbackType(DType::kQ3_K) == DType::kQ4_0);
  CHECK(FallbackType(DType::kQ4_K) == DType::kQ5_0);
  CHECK(FallbackType(DType::kQ5_K) == DType::kQ5_1);
  CHECK(FallbackType(DType::kQ6_K) == DType::kQ8_0);
  CHECK(FallbackType(DType::kIQ4_XS) == DType::kIQ4_NL);
  CHECK(FallbackType(DType::kQ8_0) == DType::kF16);
  CHECK(FallbackType(DType::kF16) == DType::kF16);
  const MixModel m;
  // Rows of 128 hold no K block; rows of 100 not even a 32-block: F16.
  TypeChoice c = ChooseType(QuantRecipe::Pure(DType::kQ6_K), m, {MixRole::kAttnQ, 0, 128});
  CHECK(c.type == DType::kQ8_0);
  CHECK(c.wanted == DType::kQ6_K);
  CHECK(c.fell_back());
  c = ChooseType(QuantRecipe::Pure(DType::kQ4_K), m, {MixRole::kAttnQ, 0, 100});
  CHECK(c.type == DType::kF16);
  c = ChooseType(QuantRecipe::Pure(DType::kQ4_K), m, {MixRole::kAttnQ, 0, 512});
  CHECK(c.type == DType::kQ4_K);
  CHECK_FALSE(c.fell_back());
  c = ChooseType(QuantRecipe::Pure(DType::kQ4_K), m, {MixRole::kKept, 0, 512});
  CHECK_FALSE(c.convert);
}

TEST_CASE("quant mix: per-tensor types of a Mixtral-shaped model", "[model][quant]") {
  const ModelConfig c = MixtralConfig();
  using T = std::map<std::string, std::string>;
  // What every mix gives the tensors outside the layers and the norms/router.
  SECTION("Q4_K_M") {
    T p = Plan(c, QuantMix::kQ4_K_M);
    CHECK(p["token_embd.weight"] == "q4_K");
    CHECK(p["output.weight"] == "q6_K");
    CHECK(p["output_norm.weight"] == "kept");
    int q6 = 0;
    for (int l = 0; l < 32; ++l) {
      INFO("layer " << l);
      CHECK(p[Blk(l, "attn_q")] == "q4_K");
      CHECK(p[Blk(l, "attn_k")] == "q8_0");  // 8 experts
      CHECK(p[Blk(l, "attn_v")] == "q8_0");
      CHECK(p[Blk(l, "attn_output")] == "q5_K");
      CHECK(p[Blk(l, "ffn_gate_exps")] == "q4_K");
      CHECK(p[Blk(l, "ffn_up_exps")] == "q4_K");
      CHECK(p[Blk(l, "ffn_down_exps")] == (MoreBits32(l) ? "q6_K" : "q4_K"));
      q6 += p[Blk(l, "ffn_down_exps")] == "q6_K";
      CHECK(p[Blk(l, "ffn_gate_inp")] == "kept");
      CHECK(p[Blk(l, "attn_norm")] == "kept");
    }
    CHECK(q6 == 16);
  }
  SECTION("Q5_K_M, Q5_K_S, Q6_K") {
    T m = Plan(c, QuantMix::kQ5_K_M), s = Plan(c, QuantMix::kQ5_K_S),
      six = Plan(c, QuantMix::kQ6_K);
    for (int l = 0; l < 32; ++l) {
      CHECK(m[Blk(l, "ffn_down_exps")] == (MoreBits32(l) ? "q6_K" : "q5_K"));
      CHECK(m[Blk(l, "attn_output")] == "q5_K");
      CHECK(s[Blk(l, "ffn_down_exps")] == "q5_K");
      CHECK(s[Blk(l, "attn_v")] == "q8_0");
      CHECK(six[Blk(l, "ffn_down_exps")] == "q6_K");
      CHECK(six[Blk(l, "attn_k")] == "q8_0");
    }
    CHECK(m["output.weight"] == "q6_K");
    CHECK(s["token_embd.weight"] == "q5_K");
    CHECK(six["output.weight"] == "q6_K");
  }
  SECTION("Q4_K_S") {
    T p = Plan(c, QuantMix::kQ4_K_S);
    for (int l = 0; l < 32; ++l) {
      CHECK(p[Blk(l, "ffn_down_exps")] == (l < 4 ? "q5_K" : "q4_K"));
      CHECK(p[Blk(l, "attn_output")] == "q5_K");
      CHECK(p[Blk(l, "attn_v")] == "q8_0");
    }
  }
  SECTION("Q3_K_S, Q3_K_M, Q3_K_L") {
    T s = Plan(c, QuantMix::kQ3_K_S), m = Plan(c, QuantMix::kQ3_K_M),
      l3 = Plan(c, QuantMix::kQ3_K_L);
    for (int l = 0; l < 32; ++l) {
      CHECK(s[Blk(l, "ffn_down_exps")] == "q3_K");
      CHECK(s[Blk(l, "attn_output")] == "q5_K");
      CHECK(m[Blk(l, "ffn_down_exps")] == (l < 2 ? "q5_K" : "q4_K"));
      CHECK(m[Blk(l, "attn_output")] == "q5_K");
      CHECK(m[Blk(l, "attn_q")] == "q3_K");
      CHECK(l3[Blk(l, "ffn_down_exps")] == "q5_K");
      CHECK(l3[Blk(l, "attn_output")] == "q3_K");  // Q3_K_L is not in the 8-expert list
      CHECK(l3[Blk(l, "attn_v")] == "q8_0");
    }
    CHECK(s["output.weight"] == "q6_K");
  }
  SECTION("Q2_K") {
    T p = Plan(c, QuantMix::kQ2_K);
    CHECK(p["token_embd.weight"] == "q2_K");
    CHECK(p["output.weight"] == "q6_K");
    for (int l = 0; l < 32; ++l) {
      CHECK(p[Blk(l, "ffn_gate_exps")] == "q2_K");
      CHECK(p[Blk(l, "ffn_down_exps")] == "q3_K");
      CHECK(p[Blk(l, "attn_output")] == "q5_K");
      CHECK(p[Blk(l, "attn_v")] == "q8_0");
    }
  }
  SECTION("IQ4_XS and IQ4_NL") {
    T xs = Plan(c, QuantMix::kIQ4_XS), nl = Plan(c, QuantMix::kIQ4_NL);
    for (int l = 0; l < 32; ++l) {
      CHECK(xs[Blk(l, "ffn_down_exps")] == (l < 4 ? "q5_K" : "iq4_xs"));
      CHECK(nl[Blk(l, "ffn_down_exps")] == (l < 4 ? "q5_K" : "iq4_nl"));
      CHECK(xs[Blk(l, "attn_output")] == "q5_K");
      CHECK(nl[Blk(l, "ffn_up_exps")] == "iq4_nl");
      CHECK(xs[Blk(l, "attn_k")] == "q8_0");
    }
    CHECK(xs["output.weight"] == "q6_K");
    CHECK(nl["token_embd.weight"] == "iq4_nl");
  }
  SECTION("MXFP4_MOE: experts MXFP4, the rest Q8_0") {
    T p = Plan(c, QuantMix::kMXFP4_MOE);
    CHECK(p["token_embd.weight"] == "q8_0");
    CHECK(p["output.weight"] == "q8_0");
    for (int l = 0; l < 32; ++l) {
      for (const char* e : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        CHECK(p[Blk(l, e)] == "mxfp4");
      }
      for (const char* a : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
        CHECK(p[Blk(l, a)] == "q8_0");
      }
      CHECK(p[Blk(l, "ffn_gate_inp")] == "kept");
    }
  }
  SECTION("block-32 mixes: the head Q6_K, attn_k / attn_v Q8_0") {
    for (QuantMix mix : {QuantMix::kQ4_0, QuantMix::kQ4_1, QuantMix::kQ5_0, QuantMix::kQ5_1}) {
      T p = Plan(c, mix);
      const std::string base(Traits(MixInfo(mix).base).name);
      INFO(base);
      CHECK(p["output.weight"] == "q6_K");
      CHECK(p["token_embd.weight"] == base);
      CHECK(p[Blk(5, "ffn_down_exps")] == base);
      CHECK(p[Blk(5, "attn_output")] == base);
      CHECK(p[Blk(5, "attn_v")] == "q8_0");
    }
    T q8 = Plan(c, QuantMix::kQ8_0);
    for (const auto& [name, type] : q8) CHECK((type == "q8_0" || type == "kept"));
  }
  SECTION("float mixes: every converted tensor in the float type") {
    for (QuantMix mix : {QuantMix::kF16, QuantMix::kBF16, QuantMix::kF32}) {
      const std::string base(Traits(MixInfo(mix).base).name);
      for (const auto& [name, type] : Plan(c, mix)) {
        INFO(name);
        CHECK((type == base || type == "kept"));
      }
    }
  }
}

TEST_CASE("quant mix: rules that depend on the model", "[model][quant]") {
  ModelConfig c = MixtralConfig();
  c.n_expert = 4;  // not 8: attn_v follows the layer rules
  auto p = Plan(c, QuantMix::kQ4_K_M);
  for (int l = 0; l < 32; ++l) {
    CHECK(p[Blk(l, "attn_v")] == (MoreBits32(l) ? "q6_K" : "q4_K"));
    CHECK(p[Blk(l, "attn_k")] == "q4_K");
    CHECK(p[Blk(l, "attn_output")] == "q4_K");
  }
  p = Plan(c, QuantMix::kQ3_K_M);
  CHECK(p[Blk(0, "attn_v")] == "q5_K");
  CHECK(p[Blk(1, "attn_v")] == "q5_K");
  CHECK(p[Blk(2, "attn_v")] == "q4_K");
  CHECK(p[Blk(3, "attn_output")] == "q4_K");
  p = Plan(c, QuantMix::kQ2_K);
  CHECK(p[Blk(3, "attn_v")] == "q4_K");  // GQA 4
  CHECK(p[Blk(3, "attn_output")] == "q3_K");
  c.n_head_kv = 32;  // no GQA
  p = Plan(c, QuantMix::kQ2_K);
  CHECK(p[Blk(3, "attn_v")] == "q3_K");
  p = Plan(c, QuantMix::kIQ4_NL);
  CHECK(p[Blk(3, "attn_v")] == "iq4_nl");
  c.output_tied = true;  // token_embd is the head: it follows the head's rule
  p = Plan(c, QuantMix::kQ4_K_M);
  CHECK(p.count("output.weight") == 0);
  CHECK(p["token_embd.weight"] == "q6_K");
  p = Plan(c, QuantMix::kQ4_K_S);
  CHECK(p[Blk(3, "attn_v")] == "q5_K");
  CHECK(p[Blk(4, "attn_v")] == "q4_K");
}

TEST_CASE("quant mix: the shipped tiny model falls back from the K family", "[model][quant]") {
  // Rows of 128: no K-family block fits; each K type takes its fallback.
  auto model = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  REQUIRE(c.n_layer == 8);
  REQUIRE(c.n_embd == 128);
  std::map<std::string, std::string> types;
  std::map<std::string, std::string> wanted;
  for (const PlannedTensor& p : PlanQuantization(**model, QuantRecipe::Mix(QuantMix::kQ4_K_M))) {
    types[p.source->name] = std::string(Traits(p.output_type()).name);
    wanted[p.source->name] = std::string(Traits(p.choice.wanted).name);
  }
  CHECK(types.size() == (*model)->gguf().tensors().size());
  CHECK(types["token_embd.weight"] == "q5_0");
  CHECK(wanted["token_embd.weight"] == "q4_K");
  CHECK(types["output.weight"] == "q8_0");  // q6_K -> q8_0
  CHECK(types["output_norm.weight"] == "f32");
  for (int l = 0; l < 8; ++l) {
    INFO("layer " << l);
    const bool more = l < 1 || l >= 7 || (l - 1) % 3 == 2;  // 0, 3, 6, 7
    CHECK(types[Blk(l, "ffn_down_exps")] == (more ? "q8_0" : "q5_0"));
    CHECK(types[Blk(l, "ffn_gate_exps")] == "q5_0");
    CHECK(types[Blk(l, "attn_v")] == "q8_0");
    CHECK(types[Blk(l, "attn_output")] == "q5_1");  // q5_K (8 experts) -> q5_1
    CHECK(types[Blk(l, "ffn_gate_inp")] == "f32");
  }
}

}  // namespace odmoe
