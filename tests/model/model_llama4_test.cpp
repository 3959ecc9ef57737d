// Llama 4 files with keys or tensors wrong: clear errors naming them.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "gguf/gguf_writer.h"
#include "model/model_file.h"
#include "test_paths.h"

namespace odmoe {
namespace {

// The tiny Llama 4 fixture with one key changed (or dropped, with an empty
// value) or one tensor dropped; the error Open() gives.
std::string OpenLlama4Modified(const std::string& key, GgufValue value,
                               const std::string& drop_key = "",
                               const std::string& drop_tensor = "") {
  auto src = GgufFile::Open(test::SourcePath("tests/data/arch/tiny-llama4-defaults.gguf"));
  REQUIRE(src.ok());
  GgufWriter w;
  for (const auto& [k, v] : (*src)->metadata()) {
    if (k != drop_key) w.SetMetadata(k, k == key ? value : v);
  }
  for (const TensorView& t : (*src)->tensors()) {
    if (t.name != drop_tensor) REQUIRE(w.AddTensorView(t).ok());
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "odmoe_model_llama4_modified.gguf").string();
  REQUIRE(w.WriteFile(path).ok());
  auto m = ModelFile::Open(path);
  std::filesystem::remove(path);
  REQUIRE_FALSE(m.ok());
  return std::string(m.status().message());
}

}  // namespace

TEST_CASE("model: llama4 files with a wrong router or layer pattern are clear errors",
          "[model][arch]") {
  CHECK_THAT(OpenLlama4Modified("llama4.expert_used_count", GgufValue::U32(2)),
             Catch::Contains("'llama4.expert_used_count' is 2"));
  CHECK_THAT(OpenLlama4Modified("", GgufValue(), "llama4.interleave_moe_layer_step"),
             Catch::Contains("llama4.interleave_moe_layer_step"));
  // Layer 0 is dense: its FFN, not experts.
  CHECK_THAT(OpenLlama4Modified("", GgufValue(), "", "blk.0.ffn_gate.weight"),
             Catch::Contains("blk.0.ffn_gate.weight"));
  CHECK_THAT(OpenLlama4Modified("", GgufValue(), "", "blk.1.ffn_up_shexp.weight"),
             Catch::Contains("blk.1.ffn_up_shexp.weight"));
  // Every layer with experts: layer 0 lacks them.
  CHECK_THAT(OpenLlama4Modified("llama4.interleave_moe_layer_step", GgufValue::U32(1)),
             Catch::Contains("no tensor named 'blk.0.ffn_gate_shexp.weight'"));
}

}  // namespace odmoe
