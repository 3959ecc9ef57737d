// A new architecture that is a variant of a known family needs its
// description and nothing else: "testmoe", Qwen2-MoE's description under
// another GGUF name, registered at run time, opens a synthetic testmoe file
// (odmoe-synth writes any registered architecture) and computes logits and
// tokens identical to the same weights stored as qwen2moe.
#include <catch2/catch.hpp>
#include <filesystem>

#include "engine/reference_engine.h"
#include "golden_steps.h"
#include "model/model_arch.h"
#include "model/synth_model.h"

namespace odmoe {
namespace {

// Registered once per process (Catch2 may run the case again).
const absl::Status& RegisterTestMoe() {
  static const absl::Status registered = [] {
    ArchDesc d = *FindArch("qwen2moe");
    d.gguf_name = "testmoe";
    d.models = "a test's renamed Qwen2-MoE";
    return RegisterArch(d);
  }();
  return registered;
}

SynthSpec Spec(const std::string& arch) {
  return SynthSpec{.arch = arch,
                   .n_layer = 2,
                   .n_embd = 64,
                   .n_ff = 96,
                   .n_expert = 8,
                   .n_expert_used = 4,
                   .n_head = 4,
                   .n_head_kv = 2,
                   .n_ff_shared = 48,
                   .n_vocab = 300,
                   .n_ctx = 64,
                   .seed = 11};
}

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_arch_variant_" + name)).string();
}

}  // namespace

TEST_CASE("arch variant: a description alone adds an architecture (testmoe = qwen2moe)",
          "[engine][arch]") {
  REQUIRE(RegisterTestMoe().ok());
  REQUIRE(FindArch("testmoe") != nullptr);
  const std::string original = Temp("qwen2moe.gguf"), variant = Temp("testmoe.gguf");
  REQUIRE(WriteSynthModel(Spec("qwen2moe"), original).ok());
  REQUIRE(WriteSynthModel(Spec("testmoe"), variant).ok());

  auto a = ReferenceEngine::Create(original, {});
  auto b = ReferenceEngine::Create(variant, {});
  INFO((b.ok() ? "" : std::string(b.status().message())));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const ModelConfig& ca = (*a)->model().config();
  const ModelConfig& cb = (*b)->model().config();
  CHECK(ca.arch == "qwen2moe");
  CHECK(cb.arch == "testmoe");
  // The blocks came from the description: biases, the gated shared expert.
  CHECK(cb.shared_expert);
  CHECK(cb.shared_gated);
  CHECK(cb.attn_bias);
  CHECK(cb.n_ff_shared == 48);
  CHECK(cb.rope_mode == RopeMode::kHalf);
  CHECK(!cb.gating.normalize);
  CHECK(cb.n_ff == ca.n_ff);

  // The same logits at the prompt's last position, bit for bit.
  const std::vector<int32_t> prompt = {1, 17, 260, 42, 5, 299, 128, 64};
  test::LocalForward fa = test::MakeLocalForward((*a)->model());
  test::LocalForward fb = test::MakeLocalForward((*b)->model());
  std::vector<float> la, lb;
  REQUIRE(fa.tf->Forward(prompt, 0, *fa.experts, &la, nullptr).ok());
  REQUIRE(fb.tf->Forward(prompt, 0, *fb.experts, &lb, nullptr).ok());
  REQUIRE(la.size() == static_cast<size_t>(ca.n_vocab));
  CHECK(la == lb);

  // And the same greedy tokens and routing through the whole engine.
  const GenerateRequest req{.prompt = "any text at all",
                            .prompt_ids = {},
                            .max_tokens = 8,
                            .sampling = {},
                            .ignore_eos = true,
                            .record_routing = true};
  auto ra = (*a)->Generate(req);
  auto rb = (*b)->Generate(req);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(ra->output_ids.size() == 8);
  CHECK(ra->output_ids == rb->output_ids);
  CHECK(ra->routing == rb->routing);
  std::filesystem::remove(original);
  std::filesystem::remove(variant);
}

}  // namespace odmoe
