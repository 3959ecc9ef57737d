// Qwen3-Next / Qwen3.5 files (Gated DeltaNet): the tiny fixtures' shapes and
// recurrent layers, odmoe-synth's files of both architectures, and bad
// files refused with errors naming the key or tensor.
#include <catch2/catch.hpp>
#include <filesystem>

#include "model/model_file.h"
#include "model/synth_model.h"
#include "modified_model.h"
#include "test_paths.h"

namespace odmoe {
namespace {

// The tiny Qwen3.5 fixture with one metadata key changed (or added) or one
// tensor dropped; the error Open() gives.
std::string OpenBroken(const std::string& key, GgufValue value, const std::string& drop = "") {
  const std::string why =
      test::OpenModifiedModel(test::SourcePath("tests/data/arch/tiny-qwen35moe.gguf"), key, value,
                              drop);
  REQUIRE_FALSE(why.empty());
  return why;
}

TEST_CASE("model: Qwen3-Next and Qwen3.5 files give their Gated DeltaNet shapes",
          "[model][delta_net]") {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    INFO(arch);
    auto m =
        ModelFile::Open(test::SourcePath(std::string("tests/data/arch/tiny-") + arch + ".gguf"));
    REQUIRE(m.ok());
    const ModelConfig& c = (*m)->config();
    CHECK(c.delta_net);
    CHECK(c.delta.conv_kernel == 4);
    CHECK(c.delta.n_k_heads == 2);
    CHECK(c.delta.n_v_heads == 4);
    CHECK(c.delta.head_k == 16);
    CHECK(c.delta.head_v == 16);
    CHECK(c.n_recurrent() == 3);
    CHECK(!c.is_recurrent(3));
    CHECK(c.rope_dims == 8);
    CHECK(c.delta_net_heads == (std::string(arch) == "qwen35moe" ? DeltaNetHeadOrder::kTiled
                                                                 : DeltaNetHeadOrder::kGrouped));
    CHECK((*m)->layer(0).ssm_conv1d.type == DType::kF32);
    CHECK((*m)->layer(3).attn_q.ne[1] == 2 * c.q_width());  // [q | gate] per head
  }
}

TEST_CASE("model: bad Gated DeltaNet files are clear errors", "[model][delta_net]") {
  CHECK_THAT(OpenBroken("qwen35moe.ssm.time_step_rank", GgufValue::U32(3)),
             Catch::Contains("ssm.time_step_rank"));
  CHECK_THAT(OpenBroken("qwen35moe.ssm.conv_kernel", GgufValue::U32(64)),
             Catch::Contains("ssm.conv_kernel"));
  CHECK_THAT(OpenBroken("qwen35moe.ssm.inner_size", GgufValue::U32(128)),
             Catch::Contains("state_size"));
  CHECK_THAT(OpenBroken("qwen35moe.attention.recurrent_layers", GgufValue::I32Array({1, 1})),
             Catch::Contains("attention.recurrent_layers"));
  CHECK_THAT(OpenBroken("", GgufValue(), "blk.1.ssm_conv1d.weight"),
             Catch::Contains("blk.1.ssm_conv1d.weight"));
  CHECK_THAT(OpenBroken("", GgufValue(), "blk.2.ssm_alpha.weight"),
             Catch::Contains("blk.2.ssm_alpha.weight"));
  // A file whose layer 0 is attention: its attn_q is missing, not its ssm tensors.
  CHECK_THAT(OpenBroken("qwen35moe.attention.recurrent_layers", GgufValue::I32Array({0, 1, 1, 0})),
             Catch::Contains("blk.0.attn_q.weight"));
}

TEST_CASE("model: odmoe-synth writes Qwen3.5 and Qwen3-Next files odmoe reads",
          "[model][delta_net]") {
  for (const char* arch : {"qwen35moe", "qwen3next"}) {
    INFO(arch);
    SynthSpec s = SynthSpec::Preset(arch).value();
    s.n_layer = 4;
    s.n_embd = 64;
    s.n_ff = 32;
    s.n_ff_shared = 32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 32;
    s.rope_dims = 8;
    s.ssm_k_heads = 2;
    s.ssm_v_heads = 4;
    s.ssm_head = 16;
    s.n_vocab = 300;
    s.n_ctx = 64;
    const std::string path =
        (std::filesystem::temp_directory_path() / (std::string("odmoe_synth_") + arch + ".gguf"))
            .string();
    REQUIRE(WriteSynthModel(s, path).ok());
    auto m = ModelFile::Open(path);
    std::filesystem::remove(path);
    INFO((m.ok() ? "" : std::string(m.status().message())));
    REQUIRE(m.ok());
    const ModelConfig& c = (*m)->config();
    CHECK(c.arch == arch);
    CHECK(c.n_recurrent() == 3);
    CHECK(c.delta.n_v_heads == 4);
    CHECK(c.rope_dims == 8);
    CHECK(c.n_ff_shared == 32);
  }
  // The real models' sizes: Qwen3.5-35B-A3B ~34.7 G parameters (F16).
  const uint64_t bytes = SynthModelBytes(SynthSpec::Preset("qwen3.5-35b-a3b").value()).value();
  CHECK(bytes > 68'000'000'000ull);
  CHECK(bytes < 71'000'000'000ull);
}

}  // namespace
}  // namespace odmoe
