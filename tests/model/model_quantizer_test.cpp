// odmoe-quantize's library (model/model_quantizer.h): every mix written out
// and read back, on the shipped model (rows of 128: the K family falls back)
// and on a synthetic model whose rows hold K blocks.
#include "model/model_quantizer.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "model/synth_model.h"
#include "test_paths.h"

namespace odmoe {
namespace {

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_quant_" + name)).string();
}

// Quantizes `in` with every mix and checks the file against the plan.
// `tag` keeps the files of tests that CTest runs in parallel apart.
void RoundTripEveryMix(const std::string& in, const std::string& tag,
                       std::map<QuantMix, std::map<std::string, DType>>* got) {
  auto source = ModelFile::Open(in);
  REQUIRE(source.ok());
  for (const QuantMixInfo& mix : QuantMixes()) {
    INFO("mix " << mix.name);
    const QuantRecipe recipe = QuantRecipe::Mix(mix.mix);
    const std::vector<PlannedTensor> plan = PlanQuantization(**source, recipe);
    const std::string out = TempFile(tag + "_" + std::string(mix.name) + ".gguf");
    QuantizeOptions opt;
    opt.recipe = recipe;
    opt.threads = 2;
    int progress_calls = 0, tensors_done = 0;
    uint64_t last_done = 0;
    opt.progress = [&](const QuantizeProgress& p) {
      ++progress_calls;
      CHECK(p.bytes_done > last_done);
      last_done = p.bytes_done;
      tensors_done += p.tensor_done;
      CHECK(p.tensors == static_cast<int>(plan.size()));
    };
    absl::StatusOr<QuantizeReport> r = QuantizeModelFile(in, out, opt);
    INFO(r.status());
    REQUIRE(r.ok());
    CHECK(tensors_done == static_cast<int>(plan.size()));
    CHECK(last_done == r->bytes_out);
    auto m = ModelFile::Open(out);
    INFO(m.status());
    REQUIRE(m.ok());
    CHECK((*m)->gguf().GetUInt("general.file_type") == mix.file_type);
    CHECK((*m)->gguf().GetString(kQuantizationKey) == std::string(mix.name));
    CHECK(SourceFingerprint(**m) == (*source)->fingerprint());
    // Every tensor in its planned type; the report's per-type totals add up.
    std::map<DType, int> counts;
    size_t fallbacks = 0;
    REQUIRE((*m)->gguf().tensors().size() == plan.size());
    for (size_t i = 0; i < plan.size(); ++i) {
      const TensorView& t = (*m)->gguf().tensors()[i];
      INFO(t.name);
      CHECK(t.name == plan[i].source->name);
      CHECK(t.type == plan[i].output_type());
      ++counts[t.type];
      fallbacks += plan[i].choice.fell_back();
      (*got)[mix.mix][t.name] = t.type;
    }
    CHECK(r->fallbacks.size() == fallbacks);
    for (const auto& [type, n] : counts) CHECK(r->by_type[type].tensors == n);
    std::filesystem::remove(out);
  }
}

std::string Blk(int l, const std::string& what) {
  return "blk." + std::to_string(l) + "." + what + ".weight";
}

}  // namespace

TEST_CASE("quantizer: every mix of the shipped model", "[model][quant]") {
  std::map<QuantMix, std::map<std::string, DType>> got;
  RoundTripEveryMix(test::SourcePath("models/tiny-mixtral-f16.gguf"), "tiny", &got);
  // Rows of 128: the K types took their fallbacks.
  auto& q4km = got[QuantMix::kQ4_K_M];
  CHECK(q4km["token_embd.weight"] == DType::kQ5_0);
  CHECK(q4km[Blk(0, "ffn_down_exps")] == DType::kQ8_0);
  CHECK(q4km[Blk(1, "ffn_down_exps")] == DType::kQ5_0);
  CHECK(q4km[Blk(1, "ffn_gate_inp")] == DType::kF32);
  CHECK(got[QuantMix::kIQ4_XS][Blk(5, "ffn_up_exps")] == DType::kIQ4_NL);
  CHECK(got[QuantMix::kMXFP4_MOE][Blk(5, "ffn_up_exps")] == DType::kMXFP4);
  CHECK(got[QuantMix::kMXFP4_MOE][Blk(5, "attn_q")] == DType::kQ8_0);
  CHECK(got[QuantMix::kQ4_1][Blk(5, "attn_q")] == DType::kQ4_1);
  CHECK(got[QuantMix::kBF16][Blk(5, "attn_q")] == DType::kBF16);
}

TEST_CASE("quantizer: every mix of a model whose rows hold K blocks", "[model][quant]") {
  SynthSpec spec;  // n_embd 256, n_ff 512: every row a whole number of K blocks
  spec.n_layer = 4;
  const std::string in = TempFile("synth-f16.gguf");
  REQUIRE(WriteSynthModel(spec, in).ok());
  std::map<QuantMix, std::map<std::string, DType>> got;
  RoundTripEveryMix(in, "synth", &got);
  auto& q4km = got[QuantMix::kQ4_K_M];
  CHECK(q4km["token_embd.weight"] == DType::kQ4_K);
  CHECK(q4km["output.weight"] == DType::kQ6_K);
  // More bits for ffn_down in layers 0 (< 4/8? no), 3 (>= 7*4/8) and 2 ((2 - 0) % 3 == 2).
  CHECK(q4km[Blk(0, "ffn_down_exps")] == DType::kQ4_K);
  CHECK(q4km[Blk(1, "ffn_down_exps")] == DType::kQ4_K);
  CHECK(q4km[Blk(2, "ffn_down_exps")] == DType::kQ6_K);
  CHECK(q4km[Blk(3, "ffn_down_exps")] == DType::kQ6_K);
  CHECK(q4km[Blk(3, "attn_v")] == DType::kQ8_0);  // 8 experts
  CHECK(got[QuantMix::kQ2_K][Blk(0, "ffn_gate_exps")] == DType::kQ2_K);
  CHECK(got[QuantMix::kQ2_K][Blk(0, "ffn_down_exps")] == DType::kQ3_K);
  CHECK(got[QuantMix::kQ3_K_M][Blk(0, "ffn_up_exps")] == DType::kQ3_K);
  CHECK(got[QuantMix::kQ5_K_S][Blk(0, "ffn_up_exps")] == DType::kQ5_K);
  CHECK(got[QuantMix::kIQ4_XS][Blk(1, "ffn_up_exps")] == DType::kIQ4_XS);
  CHECK(got[QuantMix::kQ6_K][Blk(1, "attn_q")] == DType::kQ6_K);
  // The Q4_K_M file's layers store their experts differently.
  std::filesystem::remove(in);
}

TEST_CASE("quantizer: a pure recipe, and its fallbacks", "[model][quant]") {
  const std::string in = test::SourcePath("models/tiny-mixtral-f16.gguf");
  const std::string out = TempFile("pure-q6_k.gguf");
  QuantizeOptions opt;
  opt.recipe = QuantRecipe::Pure(DType::kQ6_K);
  absl::StatusOr<QuantizeReport> r = QuantizeModelFile(in, out, opt);
  REQUIRE(r.ok());
  // Rows of 128: every converted tensor fell back to q8_0, and says so.
  CHECK(r->fallbacks.size() == static_cast<size_t>(r->tensors_converted));
  REQUIRE_FALSE(r->fallbacks.empty());
  CHECK(r->fallbacks[0].wanted == DType::kQ6_K);
  CHECK(r->fallbacks[0].used == DType::kQ8_0);
  CHECK(r->fallbacks[0].row_length == 128);
  auto m = ModelFile::Open(out);
  REQUIRE(m.ok());
  CHECK((*m)->gguf().GetString(kQuantizationKey) == std::string("pure q6_K"));
  CHECK((*m)->config().experts_of(0).down_type == DType::kQ8_0);
  std::filesystem::remove(out);
}

}  // namespace odmoe
