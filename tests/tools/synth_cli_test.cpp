// odmoe-synth as a user runs it: the dry run of the Mixtral preset prints its
// sizes, a small model is written and opens, bad flags exit 2.
#include <catch2/catch.hpp>

#include <filesystem>

#include "model/model_file.h"
#include "shell.h"
#include "test_paths.h"

namespace odmoe {
namespace {

std::string Synth() { return test::BinaryPath("bin/odmoe-synth"); }

TEST_CASE("synth cli: dry run, a small model, bad flags", "[tools]") {
  const test::ShellResult dry = test::Sh(Synth() + " --out /tmp/unused.gguf --dry-run");
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find("(llama): 32 layers, embd 4096, ff 14336, 8 experts (top-2), 32 heads "
                        "of 128 / 8 KV heads, vocab 32000") != std::string::npos);
  CHECK(dry.output.find("one expert: 352.3 MB") != std::string::npos);
  CHECK(!std::filesystem::exists("/tmp/unused.gguf"));

  const std::string path =
      (std::filesystem::temp_directory_path() / "odmoe_synth_cli.gguf").string();
  const test::ShellResult w = test::Sh(Synth() + " --out " + path +
                                       " --embd 64 --ff 64 --experts 4 --heads 4 --kv-heads 2"
                                       " --vocab 300 --layers 2 --ctx 64 --type q8_0");
  INFO(w.output);
  REQUIRE(w.exit_code == 0);
  auto model = ModelFile::Open(path);
  REQUIRE(model.ok());
  CHECK((*model)->config().n_expert == 4);
  std::filesystem::remove(path);

  auto bad = [](const std::string& args, const std::string& what) {
    const test::ShellResult r = test::Sh(Synth() + " " + args);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(what) != std::string::npos);
  };
  bad("--out x.gguf --type q4_0", "--type");
  bad("--out x.gguf --heads 7 --dry-run", "--heads");
  bad("--out x.gguf --top-k 9 --dry-run", "--top-k");
  bad("--dry-run", "out");
  bad("--out x.gguf --arch falcon --dry-run", "--arch");
}

TEST_CASE("synth cli: --arch writes each architecture with its preset's shapes", "[tools][arch]") {
  const test::ShellResult dry = test::Sh(Synth() + " --out /tmp/unused.gguf --arch qwen3moe --dry-run");
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find("synthetic-qwen3-30b-a3b (qwen3moe): 48 layers, embd 2048, ff 768, 128 "
                        "experts (top-8), 32 heads of 128 / 4 KV heads, vocab 151936") !=
        std::string::npos);
  const test::ShellResult ds =
      test::Sh(Synth() + " --out /tmp/unused.gguf --arch deepseek2 --dry-run");
  INFO(ds.output);
  CHECK(ds.exit_code == 0);
  CHECK(ds.output.find("synthetic-deepseek-v2-lite (deepseek2): 27 layers, embd 2048, ff 1408, "
                       "64 experts (top-6)") != std::string::npos);
  for (const char* arch : {"qwen3moe", "olmoe", "qwen2moe"}) {
    INFO(arch);
    const std::string path = (std::filesystem::temp_directory_path() /
                              (std::string("odmoe_synth_cli_") + arch + ".gguf"))
                                 .string();
    const test::ShellResult w =
        test::Sh(Synth() + " --out " + path + " --arch " + arch +
                 " --layers 2 --embd 64 --ff 32 --experts 8 --heads 4 --kv-heads 2 --head-dim 32"
                 " --top-k 4 --shared-ff 64 --vocab 300 --ctx 64 --type q8_0");
    INFO(w.output);
    REQUIRE(w.exit_code == 0);
    auto model = ModelFile::Open(path);
    REQUIRE(model.ok());
    CHECK((*model)->config().arch == arch);
    CHECK((*model)->config().n_expert_used == 4);
    CHECK((*model)->config().head_dim == 32);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace odmoe
