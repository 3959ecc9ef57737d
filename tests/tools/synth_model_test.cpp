// odmoe-synth's models: they open like any model, have the shapes asked for,
// are deterministic in the seed, run through the reference engine with
// finite logits, and bad shapes are refused; the Mixtral preset's sizes.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/reference_engine.h"
#include "model/model_file.h"
#include "model/synth_model.h"

namespace odmoe {
namespace {

SynthSpec Small(DType type, uint64_t seed = 3) {
  SynthSpec s;
  s.n_layer = 2;
  s.n_embd = 64;
  s.n_ff = 96;
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_vocab = 300;
  s.n_ctx = 64;
  s.type = type;
  s.seed = seed;
  return s;
}

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_synth_" + name)).string();
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("synth: small models open, match the spec and generate", "[tools]") {
  for (DType type : {DType::kF16, DType::kQ8_0}) {
    const SynthSpec s = Small(type);
    const std::string path = Temp(type == DType::kF16 ? "f16.gguf" : "q8.gguf");
    REQUIRE(WriteSynthModel(s, path).ok());
    CHECK(std::filesystem::file_size(path) == SynthModelBytes(s).value());
    auto model = ModelFile::Open(path);
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.n_layer == 2);
    CHECK(c.n_embd == 64);
    CHECK(c.n_ff == 96);
    CHECK(c.n_expert == 4);
    CHECK(c.n_expert_used == 2);
    CHECK(c.n_head_kv == 2);
    CHECK(c.n_vocab == 300);
    EngineOptions eo;
    auto engine = ReferenceEngine::Create(path, eo);
    REQUIRE(engine.ok());
    GenerateRequest req;
    req.prompt = "any text at all";
    req.max_tokens = 6;
    req.ignore_eos = true;
    auto r = (*engine)->Generate(req);
    REQUIRE(r.ok());
    CHECK(r->output_ids.size() == 6);
    for (int32_t id : r->output_ids) CHECK((id >= 0 && id < 300));
    std::filesystem::remove(path);
  }
}

TEST_CASE("synth: the seed decides the bytes", "[tools]") {
  const std::string a = Temp("a.gguf"), b = Temp("b.gguf"), c = Temp("c.gguf");
  REQUIRE(WriteSynthModel(Small(DType::kQ8_0, 5), a).ok());
  REQUIRE(WriteSynthModel(Small(DType::kQ8_0, 5), b).ok());
  REQUIRE(WriteSynthModel(Small(DType::kQ8_0, 6), c).ok());
  CHECK(Bytes(a) == Bytes(b));
  CHECK(Bytes(a) != Bytes(c));
  for (const auto& p : {a, b, c}) std::filesystem::remove(p);
}

TEST_CASE("synth: the Mixtral preset and bad shapes", "[tools]") {
  const SynthSpec m = SynthSpec::Mixtral8x7B();
  REQUIRE(ValidateSynthSpec(m).ok());
  CHECK(SynthExpertBytes(m) == 3ull * 4096 * 14336 * 2);
  SynthSpec q = m;
  q.type = DType::kQ8_0;
  CHECK(SynthExpertBytes(q) == 3ull * 4096 * 14336 / 32 * 34);
  // The whole F16 model: ~93 GB, computed without writing anything.
  const uint64_t bytes = SynthModelBytes(m).value();
  CHECK(bytes > 90'000'000'000ull);
  CHECK(bytes < 95'000'000'000ull);

  auto bad = [](SynthSpec s, const std::string& field) {
    absl::Status st = ValidateSynthSpec(s);
    INFO(st.message());
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(st.message()).find(field) == 0);
  };
  SynthSpec s = Small(DType::kF16);
  s.n_expert_used = 5;
  bad(s, "top-k");
  s = Small(DType::kF16);
  s.n_head = 5;
  bad(s, "heads");
  s = Small(DType::kF16);
  s.n_head_kv = 3;
  bad(s, "kv-heads");
  s = Small(DType::kF16);
  s.n_vocab = 100;
  bad(s, "vocab");
  s = Small(DType::kQ4_0);
  bad(s, "type");
  s = Small(DType::kQ8_0);
  s.n_ff = 100;
  bad(s, "type");
  s = Small(DType::kF16);
  s.n_layer = 0;
  bad(s, "layers");
}

TEST_CASE("synth: every architecture of the table opens with its parts and generates",
          "[tools][arch]") {
  struct Expect {
    const char* arch;
    QkNorm qk_norm;
    bool normalize, bias;
    int shared;
  };
  for (const Expect& e : {Expect{"llama", QkNorm::kNone, true, false, 0},
                          Expect{"qwen3moe", QkNorm::kPerHead, true, false, 0},
                          Expect{"olmoe", QkNorm::kFull, false, false, 0},
                          Expect{"qwen2moe", QkNorm::kNone, false, true, 48},
                          Expect{"gpt-oss", QkNorm::kNone, true, true, 0}}) {
    INFO(e.arch);
    SynthSpec s = Small(DType::kF16);
    s.arch = e.arch;
    s.n_expert = 8;
    s.n_expert_used = 4;
    s.head_dim = 32;  // q width 128 != n_embd 64
    s.n_ff_shared = e.shared;
    if (std::string(e.arch) == "gpt-oss") {  // sinks, windows of 4 on even layers, YaRN
      s.sliding_window = 4;
      s.yarn_factor = 4;
      s.yarn_original_context = 32;
    }
    const std::string path = Temp(std::string(e.arch) + ".gguf");
    REQUIRE(WriteSynthModel(s, path).ok());
    auto model = ModelFile::Open(path);
    REQUIRE(model.ok());
    const ModelConfig& c = (*model)->config();
    CHECK(c.arch == e.arch);
    CHECK(c.qk_norm == e.qk_norm);
    CHECK(c.gating.normalize == e.normalize);
    CHECK(c.attn_bias == e.bias);
    const bool oss = std::string(e.arch) == "gpt-oss";
    CHECK(c.attn_sinks == oss);
    CHECK(c.sliding_window == (oss ? 4 : 0));
    CHECK((c.rope_scaling.type == RopeScalingType::kYarn) == oss);
    CHECK(c.n_ff_shared == e.shared);
    CHECK(c.head_dim == 32);
    CHECK(c.q_width() == 128);
    CHECK(c.n_ff == 96);
    CHECK(c.rope_mode == (std::string(e.arch) == "llama" ? RopeMode::kInterleaved
                                                          : RopeMode::kHalf));
    auto engine = ReferenceEngine::Create(path, {});
    REQUIRE(engine.ok());
    GenerateRequest req;
    req.prompt = "any text at all";
    req.max_tokens = 6;
    req.ignore_eos = true;
    auto r = (*engine)->Generate(req);
    REQUIRE(r.ok());
    CHECK(r->output_ids.size() == 6);
    std::filesystem::remove(path);
  }
}

TEST_CASE("synth: deepseek2 with latent attention, a dense first layer and shared experts",
          "[tools][arch]") {
  SynthSpec s = Small(DType::kQ8_0);
  s.arch = "deepseek2";
  s.n_layer = 3;
  s.n_embd = 64;
  s.n_ff = 32;
  s.n_expert = 8;
  s.n_expert_used = 4;
  s.n_head = 4;
  s.n_head_kv = 1;
  s.kv_lora_rank = 32;
  s.qk_nope = 32;
  s.qk_rope = 8;
  s.v_head = 32;
  s.n_ff_shared = 64;
  s.n_dense_leading = 1;
  s.n_ff_dense = 96;
  s.yarn_factor = 4;
  s.yarn_original_context = 32;
  REQUIRE(ValidateSynthSpec(s).ok());
  const std::string path = Temp("deepseek2.gguf");
  REQUIRE(WriteSynthModel(s, path).ok());
  auto model = ModelFile::Open(path);
  INFO((model.ok() ? "" : std::string(model.status().message())));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  CHECK(c.attention == AttentionKind::kMla);
  CHECK(c.mla.kv_lora_rank == 32);
  CHECK(c.mla.qk_nope == 32);
  CHECK(c.mla.qk_rope == 8);
  CHECK(c.mla.v_head == 32);
  CHECK(c.head_dim == 40);
  CHECK(c.n_dense_leading == 1);
  CHECK(!c.has_experts(0));
  CHECK(c.has_experts(1));
  CHECK(c.n_ff_dense == 96);
  CHECK(c.n_ff_shared == 64);
  CHECK(!c.shared_gated);
  CHECK(!c.gating.normalize);
  CHECK(c.experts_of(0).bytes == 0);
  CHECK(c.experts_of(1).bytes > 0);
  // mscale = 1 + 0.0707 ln 4; scale = mscale^2 / sqrt(32 + 8).
  const double mscale = 1.0 + double(0.0707f) * std::log(4.0);
  CHECK(c.attn_scale == Approx(mscale * mscale / std::sqrt(40.0)).epsilon(1e-6));
  CHECK(c.rope_scaling.attention_factor == 1.0f);
  auto engine = ReferenceEngine::Create(path, {});
  REQUIRE(engine.ok());
  GenerateRequest req;
  req.prompt = "any text at all";
  req.max_tokens = 6;
  req.ignore_eos = true;
  req.record_routing = true;
  auto r = (*engine)->Generate(req);
  REQUIRE(r.ok());
  CHECK(r->output_ids.size() == 6);
  for (const TokenRouting& t : r->routing) {  // the dense layer routes nowhere
    CHECK(t[0] == -1);
    CHECK(t[4] >= 0);
  }
  std::filesystem::remove(path);
}

TEST_CASE("synth: gemma4 with sliding and full layers of their own shapes generates",
          "[tools][arch]") {
  SynthSpec s = Small(DType::kF16);
  s.arch = "gemma4";
  s.n_layer = 4;  // sliding, full, sliding, full
  s.n_expert = 8;
  s.n_expert_used = 4;
  s.head_dim = 16;
  s.head_dim_full = 32;
  s.n_head_kv_full = 1;
  s.window_period = 2;
  s.sliding_window = 4;
  s.n_ff_beside = 48;
  s.final_logit_softcap = 30.0f;
  s.n_ctx = 128;  // the prompt's spaces are 3 byte tokens each in the synthetic vocabulary
  const std::string path = Temp("gemma4.gguf");
  REQUIRE(WriteSynthModel(s, path).ok());
  auto model = ModelFile::Open(path);
  INFO((model.ok() ? "" : std::string(model.status().message())));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  CHECK(c.ffn_layout == FfnLayout::kDenseBesideExperts);
  CHECK(c.expert_layout == ExpertLayout::kStackedGateUp);
  CHECK(c.n_ff_beside == 48);
  CHECK(c.final_logit_softcap == 30.0f);
  REQUIRE(c.layer_attention.size() == 4);
  for (int l = 0; l < 4; ++l) {
    INFO("layer " << l);
    const bool full = l % 2 == 1;
    CHECK(c.window_of(l) == (full ? 0 : 4));
    CHECK(c.layer_attention[l].head_dim == (full ? 32 : 16));
    CHECK(c.layer_attention[l].n_head_kv == (full ? 1 : 2));
    CHECK(c.layer_attention[l].v_from_k == full);
    CHECK(c.layer_attention[l].rope_pairs == (full ? 4 : 0));
  }
  auto engine = ReferenceEngine::Create(path, {});
  REQUIRE(engine.ok());
  GenerateRequest req;
  req.prompt = "any text at all, longer than the window";
  req.max_tokens = 6;
  req.ignore_eos = true;
  auto r = (*engine)->Generate(req);
  INFO((r.ok() ? "" : std::string(r.status().message())));
  REQUIRE(r.ok());
  CHECK(r->output_ids.size() == 6);
  std::filesystem::remove(path);
}

TEST_CASE("synth: the presets of every architecture are valid and sized like the real models",
          "[tools][arch]") {
  const SynthSpec q3 = SynthSpec::Preset("qwen3moe").value();
  REQUIRE(ValidateSynthSpec(q3).ok());
  CHECK(q3.n_expert == 128);
  CHECK(q3.n_expert_used == 8);
  CHECK(SynthExpertBytes(q3) == 3ull * 2048 * 768 * 2);
  // Qwen3-30B-A3B holds ~30.5 G parameters: ~61 GB in F16.
  const uint64_t q3_bytes = SynthModelBytes(q3).value();
  CHECK(q3_bytes > 60'000'000'000ull);
  CHECK(q3_bytes < 62'000'000'000ull);
  for (const char* name : {"olmoe-1b-7b", "qwen1.5-moe-a2.7b", "mixtral-8x7b", "olmoe",
                           "gpt-oss-20b", "deepseek-v2-lite", "deepseek2", "gemma-4-26b-a4b"}) {
    INFO(name);
    absl::StatusOr<SynthSpec> s = SynthSpec::Preset(name);
    REQUIRE(s.ok());
    CHECK(ValidateSynthSpec(*s).ok());
  }
  // DeepSeek-V2-Lite holds ~15.7 G parameters: ~31.4 GB in F16.
  const uint64_t ds_bytes = SynthModelBytes(SynthSpec::Preset("deepseek2").value()).value();
  CHECK(ds_bytes > 30'500'000'000ull);
  CHECK(ds_bytes < 32'500'000'000ull);
  // gemma-4-26B-A4B holds ~25.9 G parameters (30 layers): ~52 GB in F16.
  const uint64_t g4_bytes = SynthModelBytes(SynthSpec::Preset("gemma4").value()).value();
  CHECK(g4_bytes > 50'000'000'000ull);
  CHECK(g4_bytes < 54'000'000'000ull);
  CHECK(SynthSpec::Preset("gpt-5").status().code() == absl::StatusCode::kInvalidArgument);
  SynthSpec s = Small(DType::kF16);
  s.arch = "qwen2moe";  // a shared expert needs its width
  CHECK(std::string(ValidateSynthSpec(s).message()).find("shared-ff") == 0);
  s.arch = "gpt-oss";  // sliding-window layers need a window
  CHECK(std::string(ValidateSynthSpec(s).message()).find("window") == 0);
  s.arch = "falcon";
  CHECK(std::string(ValidateSynthSpec(s).message()).find("arch") == 0);
}

TEST_CASE("synth: llama4 with interleaved dense layers, NoPE and a top-1 input-scaled router",
          "[tools][arch]") {
  SynthSpec s = Small(DType::kQ8_0);
  s.arch = "llama4";
  s.n_layer = 4;
  s.n_ff = 32;
  s.n_ff_shared = 32;
  s.moe_layer_step = 2;
  s.n_ff_dense = 64;
  s.n_expert = 8;
  s.n_expert_used = 2;
  CHECK(std::string(ValidateSynthSpec(s).message()).find("top-k") == 0);
  s.n_expert_used = 1;
  REQUIRE(ValidateSynthSpec(s).ok());
  const std::string path = Temp("llama4.gguf");
  REQUIRE(WriteSynthModel(s, path).ok());
  auto model = ModelFile::Open(path);
  INFO((model.ok() ? "" : std::string(model.status().message())));
  REQUIRE(model.ok());
  const ModelConfig& c = (*model)->config();
  CHECK(c.moe_layer_step == 2);
  CHECK(c.n_moe_layer() == 2);
  CHECK(!c.has_experts(0));
  CHECK(c.has_experts(1));
  CHECK(!c.has_experts(2));
  CHECK(c.has_experts(3));
  CHECK(c.first_moe_layer() == 1);
  CHECK(c.n_ff_dense == 64);
  CHECK(c.n_ff_shared == 32);
  CHECK(c.rope_of(0));
  CHECK(!c.rope_of(3));  // NoPE: no chunks, the temperature instead
  CHECK(c.chunk_of(0) == 8192);
  CHECK(c.chunk_of(3) == 0);
  CHECK(c.attn_temperature_of(3, 8190) == 1.0f);
  CHECK(c.attn_temperature_of(3, 8191) == Approx(std::log(2.0) * 0.1 + 1.0));
  CHECK(c.attn_temperature_of(0, 8191) == 1.0f);
  CHECK(c.rope_qk_rms_norm);
  CHECK(c.router_input_scaled);
  CHECK(c.experts_of(0).bytes == 0);
  CHECK(c.experts_of(1).bytes > 0);
  auto engine = ReferenceEngine::Create(path, {});
  REQUIRE(engine.ok());
  GenerateRequest req;
  req.prompt = "any text at all";
  req.max_tokens = 6;
  req.ignore_eos = true;
  req.record_routing = true;
  auto r = (*engine)->Generate(req);
  REQUIRE(r.ok());
  CHECK(r->output_ids.size() == 6);
  for (const TokenRouting& t : r->routing) {  // one expert per MoE layer, none in dense ones
    CHECK(t[0] == -1);
    CHECK(t[1] >= 0);
    CHECK(t[2] == -1);
    CHECK(t[3] >= 0);
  }
  std::filesystem::remove(path);
  // Scout holds ~108 G parameters in its text layers (~216 GB in F16);
  // Maverick ~400 G.
  const SynthSpec scout = SynthSpec::Preset("llama-4-scout").value();
  REQUIRE(ValidateSynthSpec(scout).ok());
  const uint64_t scout_bytes = SynthModelBytes(scout).value();
  CHECK(scout_bytes > 210'000'000'000ull);
  CHECK(scout_bytes < 220'000'000'000ull);
  const SynthSpec maverick = SynthSpec::Preset("llama-4-maverick").value();
  REQUIRE(ValidateSynthSpec(maverick).ok());
  const uint64_t maverick_bytes = SynthModelBytes(maverick).value();
  CHECK(maverick_bytes > 790'000'000'000ull);
  CHECK(maverick_bytes < 810'000'000'000ull);
}

}  // namespace
}  // namespace odmoe
