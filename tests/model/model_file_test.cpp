#include "model/model_file.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "gguf/gguf_writer.h"
#include "model/expert_pack.h"
#include "modified_gguf.h"
#include "retyped_model.h"
#include "test_paths.h"

namespace odmoe {

TEST_CASE("model: the shipped model's configuration", "[model]") {
  auto m = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK(c.arch == "llama");
  CHECK(c.n_expert == 8);
  CHECK(c.n_expert_used == 2);
  CHECK(c.n_head % c.n_head_kv == 0);
  CHECK(c.n_head_kv < c.n_head);  // GQA
  CHECK(c.expert_layout == ExpertLayout::kStacked);
  CHECK(c.rope_mode == RopeMode::kInterleaved);
  CHECK(c.n_vocab >= 2000);
  REQUIRE(c.expert_storage.size() == static_cast<size_t>(c.n_layer));
  CHECK(c.expert_storage_uniform());
  CHECK(c.experts_of(0).bytes == 3 * RowBytes(c.experts_of(0).gate_type, c.n_embd) * c.n_ff);
  CHECK(c.expert_bytes_max == c.experts_of(0).bytes);
}

TEST_CASE("model: an expert slice of a 3-D tensor is its contiguous part", "[model]") {
  auto m = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  const LayerTensors& l1 = (*m)->layer(1);
  const ExpertTensors e5 = (*m)->Expert(1, 5);
  CHECK(e5.gate.n_dims == 2);
  CHECK(e5.gate.ne[0] == c.n_embd);
  CHECK(e5.gate.ne[1] == c.n_ff);
  CHECK(e5.down.ne[0] == c.n_ff);
  CHECK(e5.down.ne[1] == c.n_embd);
  CHECK(e5.gate.data == l1.gate_exps.Row(5 * c.n_ff));
  CHECK(e5.down.data == l1.down_exps.Row(5 * static_cast<int64_t>(c.n_embd)));

  const ExpertPackLayout layout = ExpertPackLayout::For(c, 1);
  CHECK(layout.total_bytes >= c.experts_of(1).bytes);
  CHECK(layout.up_offset % 64 == 0);
  CHECK(layout.down_offset % 64 == 0);
  std::vector<uint8_t> blob(layout.total_bytes);
  PackExpert(e5, layout, blob.data());
  const ExpertWeights w = layout.WeightsAt(blob.data());
  CHECK(std::memcmp(w.gate.data, e5.gate.data, e5.gate.bytes()) == 0);
  CHECK(std::memcmp(w.up.data, e5.up.data, e5.up.bytes()) == 0);
  CHECK(std::memcmp(w.down.data, e5.down.data, e5.down.bytes()) == 0);
  CHECK(w.down.rows == c.n_embd);
  CHECK(w.down.cols == c.n_ff);
  // No biases: the pack is the three matrices alone, as it always was.
  CHECK(!layout.has_bias);
  CHECK(w.gate_bias == nullptr);
  CHECK(w.down_bias == nullptr);
  CHECK(w.activation.kind == ExpertActivation::Kind::kSwiGlu);
  const auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  CHECK(layout.total_bytes ==
        aligned(e5.gate.bytes()) + aligned(e5.up.bytes()) + aligned(e5.down.bytes()));
}

TEST_CASE("model: a gpt-oss expert packs its biases and its activation", "[model]") {
  auto m = ModelFile::Open(test::SourcePath("tests/data/arch/tiny-gpt-oss.gguf"));
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK(c.arch == "gpt-oss");
  CHECK(c.expert_bias);
  CHECK(c.router_bias);
  CHECK(c.attn_sinks);
  CHECK(c.sliding_window == 8);
  CHECK(c.window_of(0) == 8);
  CHECK(c.window_of(1) == 0);
  CHECK(c.rope_scaling.type == RopeScalingType::kYarn);
  CHECK(!c.rope_scaling.truncate);
  // The FFN norm is the architecture's post_attention_norm.
  CHECK((*m)->layer(2).ffn_norm.name == "blk.2.post_attention_norm.weight");
  const LayerTensors& l2 = (*m)->layer(2);
  const ExpertTensors e7 = (*m)->Expert(2, 7);
  REQUIRE(e7.gate_bias.data != nullptr);
  CHECK(e7.gate_bias.ne[0] == c.n_ff);
  CHECK(e7.down_bias.ne[0] == c.n_embd);
  CHECK(e7.up_bias.data == l2.up_exps_bias.Row(7));
  const ExpertPackLayout layout = ExpertPackLayout::For(c, 2);
  CHECK(layout.has_bias);
  CHECK(layout.gate_bias_offset % 64 == 0);
  CHECK(layout.down_bias_offset % 64 == 0);
  CHECK(layout.total_bytes >= layout.down_bias_offset + c.n_embd * sizeof(float));
  std::vector<uint8_t> blob(layout.total_bytes);
  PackExpert(e7, layout, blob.data());
  const ExpertWeights w = layout.WeightsAt(blob.data());
  CHECK(std::memcmp(w.gate.data, e7.gate.data, e7.gate.bytes()) == 0);
  CHECK(std::memcmp(w.down.data, e7.down.data, e7.down.bytes()) == 0);
  REQUIRE(w.gate_bias != nullptr);
  CHECK(std::memcmp(w.gate_bias, e7.gate_bias.data, c.n_ff * sizeof(float)) == 0);
  CHECK(std::memcmp(w.up_bias, e7.up_bias.data, c.n_ff * sizeof(float)) == 0);
  CHECK(std::memcmp(w.down_bias, e7.down_bias.data, c.n_embd * sizeof(float)) == 0);
  CHECK(w.activation.kind == ExpertActivation::Kind::kSwiGluOai);
  CHECK(w.activation.alpha == 1.702f);
  CHECK(w.activation.limit == 7.0f);
}

TEST_CASE("model: the per-expert layout holds the same experts", "[model]") {
  auto stacked = ModelFile::Open(test::SourcePath("tests/data/tiny-mixtral-2layer.gguf"));
  auto legacy = ModelFile::Open(test::SourcePath("tests/data/tiny-mixtral-2layer-legacy.gguf"));
  REQUIRE(stacked.ok());
  REQUIRE(legacy.ok());
  CHECK((*legacy)->config().expert_layout == ExpertLayout::kPerExpert);
  CHECK((*stacked)->config().n_layer == 2);
  for (int l = 0; l < 2; ++l) {
    for (int e = 0; e < (*stacked)->config().n_expert; ++e) {
      const ExpertTensors a = (*stacked)->Expert(l, e), b = (*legacy)->Expert(l, e);
      REQUIRE(a.gate.bytes() == b.gate.bytes());
      CHECK(std::memcmp(a.gate.data, b.gate.data, a.gate.bytes()) == 0);
      CHECK(std::memcmp(a.up.data, b.up.data, a.up.bytes()) == 0);
      CHECK(std::memcmp(a.down.data, b.down.data, a.down.bytes()) == 0);
    }
  }
}

TEST_CASE("model: fingerprints identify the model", "[model]") {
  auto a = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  auto b = ModelFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  auto c = ModelFile::Open(test::SourcePath("tests/data/tiny-mixtral-2layer.gguf"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK((*a)->fingerprint() == (*b)->fingerprint());
  CHECK((*a)->fingerprint() != (*c)->fingerprint());
}

namespace {

// Rewrites the 2-layer fixture with one metadata key changed or one tensor
// removed, and returns the error Open() gives.
std::string OpenModified(const std::string& key, GgufValue value, const std::string& drop = "") {
  return test::OpenModifiedError(test::SourcePath("tests/data/tiny-mixtral-2layer.gguf"), key,
                                 std::move(value), drop);
}

}  // namespace

TEST_CASE("model: invalid model files are clear errors", "[model]") {
  CHECK_THAT(OpenModified("general.architecture", GgufValue::String("gpt-neox")),
             Catch::Contains("unsupported architecture 'gpt-neox'"));
  CHECK_THAT(OpenModified("llama.expert_count", GgufValue::U32(0)),
             Catch::Contains("expert_count"));
  CHECK_THAT(OpenModified("llama.expert_used_count", GgufValue::U32(9)),
             Catch::Contains("expert_used_count"));
  CHECK_THAT(OpenModified("llama.attention.head_count", GgufValue::String("eight")),
             Catch::Contains("attention.head_count"));
  CHECK_THAT(OpenModified("llama.embedding_length", GgufValue::U32(100)),
             Catch::Contains("embedding_length"));
  CHECK_THAT(OpenModified("", GgufValue(), "blk.1.attn_k.weight"),
             Catch::Contains("blk.1.attn_k.weight"));
  CHECK_THAT(OpenModified("", GgufValue(), "blk.0.ffn_down_exps.weight"),
             Catch::Contains("blk.0.ffn_down_exps.weight"));
  auto missing = ModelFile::Open("/nonexistent/dir/model.gguf");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

}  // namespace odmoe

namespace odmoe {
namespace {

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_model_" + name)).string();
}

}  // namespace

TEST_CASE("model: layers may store their experts in different types", "[model]") {
  // Layer 0: gate Q8_0, up F16, down Q5_0; layer 1: F16 (as in the source).
  const std::string path = TempFile("layer-types.gguf");
  REQUIRE(test::WriteRetypedModel(test::SourcePath("tests/data/tiny-mixtral-2layer.gguf"), path,
                                  [](const TensorView& t) -> std::optional<DType> {
                                    if (!test::ExpertsOfLayer(t, 0)) return std::nullopt;
                                    if (absl::StrContains(t.name, "gate")) return DType::kQ8_0;
                                    if (absl::StrContains(t.name, "down")) return DType::kQ5_0;
                                    return std::nullopt;
                                  })
              .ok());
  auto m = ModelFile::Open(path);
  INFO(m.status());
  REQUIRE(m.ok());
  const ModelConfig& c = (*m)->config();
  CHECK_FALSE(c.expert_storage_uniform());
  CHECK(c.experts_of(0).gate_type == DType::kQ8_0);
  CHECK(c.experts_of(0).up_type == DType::kF16);
  CHECK(c.experts_of(0).down_type == DType::kQ5_0);
  CHECK(c.experts_of(1).gate_type == DType::kF16);
  CHECK(c.experts_of(1).down_type == DType::kF16);
  const size_t f16_matrix = RowBytes(DType::kF16, c.n_embd) * c.n_ff;
  CHECK(c.experts_of(1).bytes == 3 * f16_matrix);
  CHECK(c.experts_of(0).bytes == RowBytes(DType::kQ8_0, c.n_embd) * c.n_ff + f16_matrix +
                                     RowBytes(DType::kQ5_0, c.n_ff) * c.n_embd);
  CHECK(c.expert_bytes_max == c.experts_of(1).bytes);
  // Each layer packs in its own layout; a slot for any expert is the largest.
  const ExpertPackLayout l0 = ExpertPackLayout::For(c, 0), l1 = ExpertPackLayout::For(c, 1);
  CHECK(l0.down_type == DType::kQ5_0);
  CHECK(l0.total_bytes < l1.total_bytes);
  CHECK(LargestPackedExpert(c) == l1.total_bytes);
  CHECK(LargestPackedExpert(c, {0}) == l0.total_bytes);
  CHECK(MeanPackedExpert(c) == Approx((l0.total_bytes + l1.total_bytes) / 2.0));
  const ExpertTensors e3 = (*m)->Expert(0, 3);
  std::vector<uint8_t> blob(l0.total_bytes);
  PackExpert(e3, l0, blob.data());
  const ExpertWeights w = l0.WeightsAt(blob.data());
  CHECK(w.down.type == DType::kQ5_0);
  CHECK(std::memcmp(w.down.data, e3.down.data, e3.down.bytes()) == 0);
  CHECK(std::memcmp(w.up.data, e3.up.data, e3.up.bytes()) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("model: every expert of a layer must be stored alike", "[model]") {
  // The per-expert layout can store one expert differently: refused, naming it.
  const std::string path = TempFile("odd-expert.gguf");
  REQUIRE(test::WriteRetypedModel(test::SourcePath("tests/data/tiny-mixtral-2layer-legacy.gguf"),
                                  path,
                                  [](const TensorView& t) -> std::optional<DType> {
                                    if (t.name == "blk.1.ffn_down.3.weight") return DType::kQ8_0;
                                    return std::nullopt;
                                  })
              .ok());
  auto m = ModelFile::Open(path);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(m.status().message());
  INFO(message);
  CHECK(message.find(path + ": expert 3 of layer 1 is stored as gate f16 / up f16 / down q8_0, "
                            "but expert 0 of that layer as f16 / f16 / f16") == 0);
  CHECK(message.find("every expert of a layer must be stored in the same types") !=
        std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace odmoe
