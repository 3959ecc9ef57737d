// The architecture registry: the shipped descriptions are valid and listed
// in order, names are unique, inconsistent descriptions are refused naming
// the field, and tensor names follow a description's exceptions.
#include <catch2/catch.hpp>
#include <string>

#include "model/model_arch.h"

namespace odmoe {

TEST_CASE("arch registry: the shipped descriptions, valid and in order", "[model][arch]") {
  const std::vector<std::string_view> names = SupportedArchNames();
  REQUIRE(names.size() >= 6);
  const std::vector<std::string_view> shipped = {"llama",    "qwen3moe", "olmoe",
                                                 "qwen2moe", "gpt-oss",  "deepseek2"};
  CHECK(std::vector<std::string_view>(names.begin(), names.begin() + 6) == shipped);
  for (std::string_view name : names) {
    INFO(name);
    const ArchDesc* a = FindArch(name);
    REQUIRE(a != nullptr);
    CHECK(a->gguf_name == name);
    CHECK(!a->models.empty());
    CHECK(ValidateArchDesc(*a).ok());
  }
  CHECK(FindArch("falcon") == nullptr);
  CHECK(FindArch("") == nullptr);
}

TEST_CASE("arch registry: tensor names, common and the description's exceptions", "[model][arch]") {
  const ArchDesc& oss = *FindArch("gpt-oss");
  const ArchDesc& qwen = *FindArch("qwen3moe");
  CHECK(TensorName(oss, TensorRole::kFfnNorm, 3) == "blk.3.post_attention_norm.weight");
  CHECK(TensorName(qwen, TensorRole::kFfnNorm, 3) == "blk.3.ffn_norm.weight");
  CHECK(TensorName(oss, TensorRole::kAttnQ, 0) == "blk.0.attn_q.weight");
  CHECK(TensorName(qwen, TensorRole::kFfnDownExpert, 2, 7) == "blk.2.ffn_down.7.weight");
  CHECK(TensorName(qwen, TensorRole::kTokenEmbd) == "token_embd.weight");
  CHECK(MetadataKey(oss, "expert_count") == "gpt-oss.expert_count");
}

TEST_CASE("arch registry: a taken name and inconsistent descriptions are refused",
          "[model][arch]") {
  ArchDesc copy = *FindArch("qwen2moe");
  absl::Status taken = RegisterArch(copy);
  CHECK(taken.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(taken.message()), Catch::Contains("'qwen2moe'"));

  auto refused = [](const ArchDesc& d, const std::string& field) {
    const absl::Status st = RegisterArch(d);
    INFO(st);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()), Catch::Contains(field));
    CHECK(FindArch(d.gguf_name) == nullptr);
  };
  refused(ArchDesc{}, "gguf_name");
  refused(ArchDesc{.gguf_name = "has space"}, "gguf_name");
  // Sliding layers with nowhere to read the window from.
  refused(ArchDesc{.gguf_name = "slides", .blocks = {.window_layers = WindowLayers::kEven}},
          "sliding_window");
  refused(ArchDesc{.gguf_name = "badkey",
                   .keys = {{.suffix = "x", .min = 4, .max = 2, .into = &ModelConfig::n_ff}}},
          "keys");
  refused(
      ArchDesc{
          .gguf_name = "badfallback",
          .keys = {{.suffix = "x", .min = 1, .max = 8, .fallback = 9, .into = &ModelConfig::n_ff}}},
      "fallback");
  refused(ArchDesc{.gguf_name = "badclamp",
                   .blocks = {.expert_activation = {ExpertActivation::Kind::kSwiGluOai, 0, 7}}},
          "expert_activation");
  refused(ArchDesc{.gguf_name = "badname", .tensor_names = {{TensorRole::kFfnNorm, ""}}},
          "tensor_names");
}

}  // namespace odmoe
