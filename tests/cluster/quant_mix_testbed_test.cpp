// Every quantization mix through the ten-node testbed as processes: the file
// odmoe-quantize writes loads in every daemon (main, shadow, eight workers),
// and greedy generation on the testbed gives the same token ids and text as
// odmoe-run on that file.
//
// The shipped model's rows of 128 hold no 256-element K block, so its K mixes
// fall back to block32 types; a synthetic model with rows of 256 (odmoe-synth)
// takes the K mixes again so that every K type runs in the daemons too.
// The shipped model's mixes are split over a few test cases, which CTest can
// run side by side.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "cluster/main_client.h"
#include "cluster/process_testbed.h"
#include "model/model_file.h"
#include "model/quant_mix.h"
#include "shell.h"
#include "test_paths.h"

namespace odmoe::test {
namespace {

constexpr int kTokens = 16;

// A greedy generation: the sequence's ids (prompt with BOS, then the output)
// and the text as odmoe-run prints it (prompt, output, newline).
struct Generation {
  std::vector<int32_t> ids;
  std::string text;
};

// odmoe-run on `model`. The ids come from its --dump-experts lines, one per
// position the model ran: every id but the last generated one, which only
// the text shows.
Generation GenerateSingleProcess(const std::string& model, const std::string& prompt,
                                 const std::string& dump) {
  const ShellResult r = Sh("(" + Bin("odmoe-run") + " --model " + model + " -n " +
                           std::to_string(kTokens) + " --ignore-eos --threads 1 --dump-experts " +
                           dump + " --prompt \"" + prompt + "\" 2>/dev/null)");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  Generation g{{}, r.output};
  std::ifstream in(dump);
  const std::string key = "\"token\":";
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(key);
    REQUIRE(at != std::string::npos);
    const size_t from = at + key.size();
    int32_t id = 0;
    REQUIRE(absl::SimpleAtoi(line.substr(from, line.find(',', from) - from), &id));
    g.ids.push_back(id);
  }
  return g;
}

// The same request through the testbed's main node.
Generation GenerateOnTestbed(const ProcessTestbed& bed, const std::string& prompt) {
  v1::GenerateRequest req;
  req.set_prompt(prompt);
  req.set_max_tokens(kTokens);
  req.set_ignore_eos(true);
  std::string text;
  std::vector<int32_t> streamed;
  absl::StatusOr<v1::GenerateStats> stats =
      GenerateOnMain(bed.main_address(), req, [&](int32_t id, std::string_view piece) {
        if (id >= 0) streamed.push_back(id);
        text += piece;
      });
  INFO(stats.status());
  REQUIRE(stats.ok());
  const std::vector<int32_t> output(stats->output_ids().begin(), stats->output_ids().end());
  CHECK(output.size() == kTokens);
  CHECK(streamed == output);  // the stream and the statistics agree
  Generation g{{stats->prompt_ids().begin(), stats->prompt_ids().end()}, prompt + text + "\n"};
  g.ids.insert(g.ids.end(), output.begin(), output.end());
  return g;
}

// Quantizes `source` to `mix`, generates with odmoe-run and on the testbed,
// and requires the same ids and text. Returns the file's tensor types.
std::set<DType> CheckMix(const std::string& source, const QuantMixInfo& mix,
                         const std::string& prompt) {
  const std::string name(mix.name);
  INFO("mix " << name);
  const TempDir files("odmoe_mix_" + name);  // declared first: removed after `down`
  const std::string model = files / (name + ".gguf");
  {  // (the scopes keep long outputs out of the messages of later checks)
    const ShellResult q =
        Sh(Bin("odmoe-quantize") + " " + source + " " + model + " --type " + name + " --threads 1");
    INFO(q.output);
    REQUIRE(q.exit_code == 0);
  }
  std::set<DType> types;
  {
    auto m = ModelFile::Open(model);
    REQUIRE(m.ok());
    for (const TensorView& t : (*m)->gguf().tensors()) types.insert(t.type);
  }
  const Generation single = GenerateSingleProcess(model, prompt, files / "experts.jsonl");

  ProcessTestbed bed(model, "odmoe_mix_testbed_" + name);
  {
    const ShellResult up = bed.Up();
    INFO(up.output);
    REQUIRE(up.exit_code == 0);
  }
  const Generation cluster = GenerateOnTestbed(bed, prompt);
  REQUIRE(cluster.ids.size() > kTokens + 1);  // BOS, the prompt, the output
  const std::vector<int32_t> ran(cluster.ids.begin(), cluster.ids.end() - 1);
  CHECK(ran == single.ids);
  CHECK(cluster.text == single.text);
  const ShellResult down = bed.Down();
  INFO(down.output);
  CHECK(down.exit_code == 0);
  return types;
}

// The shipped model's mixes whose index in the table is `part` modulo `parts`.
void CheckShippedModelMixes(size_t part, size_t parts) {
  const std::vector<QuantMixInfo>& mixes = QuantMixes();
  for (size_t i = part; i < mixes.size(); i += parts) {
    CheckMix(SourcePath("models/tiny-mixtral-f16.gguf"), mixes[i], "The meaning of life is");
  }
}

}  // namespace

TEST_CASE("processes: the shipped model's mixes through the testbed (1/3)",
          "[cluster][processes][quant]") {
  CheckShippedModelMixes(0, 3);
}
TEST_CASE("processes: the shipped model's mixes through the testbed (2/3)",
          "[cluster][processes][quant]") {
  CheckShippedModelMixes(1, 3);
}
TEST_CASE("processes: the shipped model's mixes through the testbed (3/3)",
          "[cluster][processes][quant]") {
  CheckShippedModelMixes(2, 3);
}

TEST_CASE("processes: K mixes of a model with rows of 256 through the testbed",
          "[cluster][processes][quant]") {
  const TempDir dir("odmoe_mix_synth");
  const std::string source = dir / "synth-f16.gguf";
  const ShellResult synth =
      Sh(Bin("odmoe-synth") + " --out " + source +
         " --layers 2 --embd 256 --ff 512 --experts 8 --top-k 2 --heads 8 --kv-heads 2"
         " --vocab 512 --ctx 256 --seed 3");
  INFO(synth.output);
  REQUIRE(synth.exit_code == 0);
  std::set<DType> types;
  for (const QuantMix mix : {QuantMix::kQ2_K, QuantMix::kQ3_K_M, QuantMix::kQ4_K_M,
                             QuantMix::kQ5_K_M, QuantMix::kQ6_K, QuantMix::kIQ4_XS}) {
    const std::set<DType> used = CheckMix(source, MixInfo(mix), "The sea");
    types.insert(used.begin(), used.end());
  }
  // Every K type ran in the daemons, none replaced by a fallback.
  for (const DType t :
       {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    INFO(Traits(t).name);
    CHECK(types.count(t) == 1);
  }
}

}  // namespace odmoe::test
