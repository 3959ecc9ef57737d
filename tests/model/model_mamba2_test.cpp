// Nemotron-H files (Mamba-2 hybrids): the tiny fixtures' shapes and layer
// blocks, the FFN layers refused by name until their routing and gate-less
// experts exist, and bad keys / tensors refused with their names.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "gguf/gguf_writer.h"
#include "model/model_file.h"
#include "test_paths.h"

namespace odmoe {
namespace {

const char* const kMixers = "tests/data/arch/tiny-nemotron_h_moe-mixers.gguf";

// Open()'s result on a copy of the mixers fixture where `key` holds `value`
// (when `key` is set) and tensor `drop` is left out (when set).
absl::Status OpenEdited(const std::string& key, const GgufValue& value,
                        const std::string& drop = "") {
  auto src = GgufFile::Open(test::SourcePath(kMixers));
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) w.SetMetadata(k, k == key ? value : v);
  for (const TensorView& t : (*src)->tensors()) {
    if (t.name != drop) REQUIRE(w.AddTensorView(t).ok());
  }
  const auto path = std::filesystem::temp_directory_path() / "odmoe_mamba2_edited.gguf";
  REQUIRE(w.WriteFile(path.string()).ok());
  auto m = ModelFile::Open(path.string());
  std::filesystem::remove(path);
  return m.status();
}

TEST_CASE("model: a Nemotron-H file gives its Mamba-2 shapes and one block per layer",
          "[model][mamba2]") {
  auto m = ModelFile::Open(test::SourcePath(kMixers));
  INFO((m.ok() ? "" : std::string(m.status().message())));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK(c.arch == "nemotron_h_moe");
  CHECK(c.mamba2);
  CHECK(c.no_rope);
  CHECK(c.mamba.n_heads == 8);
  CHECK(c.mamba.head_dim == 16);
  CHECK(c.mamba.n_groups == 2);
  CHECK(c.mamba.state == 16);
  CHECK(c.mamba.conv_kernel == 4);
  CHECK(c.mamba.in_proj() == 2 * 128 + 2 * 2 * 16 + 8);
  CHECK(c.n_head_kv == 2);
  CHECK(c.n_recurrent() == 3);
  CHECK(c.n_moe_layer() == 0);
  const LayerBlock want[] = {LayerBlock::kMamba2, LayerBlock::kAttention, LayerBlock::kMamba2,
                             LayerBlock::kMamba2};
  REQUIRE(c.layer_blocks.size() == 4);
  for (int l = 0; l < 4; ++l) CHECK(c.layer_blocks[static_cast<size_t>(l)] == want[l]);
  CHECK((*m)->layer(0).ssm_a.type == DType::kF32);
  CHECK((*m)->layer(1).attn_q.ne[1] == c.q_width());
}

TEST_CASE("model: Nemotron-H FFN layers and bad Mamba-2 files are clear errors",
          "[model][mamba2]") {
  // The MoE fixture: its FFN layers (sigmoid routing, relu^2 experts) are not run yet.
  auto moe = ModelFile::Open(test::SourcePath("tests/data/arch/tiny-nemotron_h_moe.gguf"));
  REQUIRE_FALSE(moe.ok());
  CHECK(moe.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(moe.status().message()), Catch::Contains("layer 1"));

  auto message = [](const absl::Status& s) {
    REQUIRE_FALSE(s.ok());
    return std::string(s.message());
  };
  CHECK_THAT(message(OpenEdited("nemotron_h_moe.ssm.time_step_rank", GgufValue::U32(3))),
             Catch::Contains("ssm.time_step_rank"));
  CHECK_THAT(message(OpenEdited("nemotron_h_moe.ssm.group_count", GgufValue::U32(16))),
             Catch::Contains("ssm.group_count"));
  CHECK_THAT(
      message(OpenEdited("nemotron_h_moe.attention.head_count_kv", GgufValue::I32Array({0, 2}))),
      Catch::Contains("attention.head_count_kv"));
  CHECK_THAT(
      message(OpenEdited("nemotron_h_moe.feed_forward_length", GgufValue::I32Array({0, 32, 0, 0}))),
      Catch::Contains("layer 1"));
  CHECK_THAT(message(OpenEdited("", GgufValue(), "blk.2.ssm_conv1d.bias")),
             Catch::Contains("blk.2.ssm_conv1d.bias"));
  CHECK_THAT(message(OpenEdited("", GgufValue(), "blk.3.ssm_d")), Catch::Contains("blk.3.ssm_d"));
  CHECK_THAT(message(OpenEdited("", GgufValue(), "blk.1.attn_k.weight")),
             Catch::Contains("blk.1.attn_k.weight"));
}

}  // namespace
}  // namespace odmoe
