// The command-line tools as a user runs them: every kind of bad input gets one
// clear message and a non-zero exit; good input works.
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/reference_engine.h"
#include "model/model_file.h"
#include "model/quant_mix.h"
#include "nlohmann/json.hpp"
#include "shell.h"
#include "test_paths.h"
#include "util/cli_args.h"

namespace odmoe {
namespace {

using Result = test::ShellResult;
using test::Sh;

std::string Run() { return test::BinaryPath("bin/odmoe-run"); }
std::string Quantize() { return test::BinaryPath("bin/odmoe-quantize"); }
std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_cli_" + name)).string();
}

void ExpectError(const std::string& args, const std::string& message) {
  const Result r = Sh(Run() + " " + args);
  INFO("args: " << args << "\noutput: " << r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find(message) != std::string::npos);
  CHECK(r.output.find("error:") != std::string::npos);
}

}  // namespace

TEST_CASE("every binary answers help and version and refuses an unknown flag", "[cli]") {
  std::vector<std::string> binaries = {
      "odmoe",          "odmoe-run",    "odmoe-cluster",    "odmoe-bench",
      "odmoe-quantize", "odmoe-synth",  "odmoe-perplexity", "odmoe-bench-ops",
      "odmoe-main",     "odmoe-shadow", "odmoe-worker",     "odmoe-bench-sampling"};
  if (std::filesystem::exists(test::BinaryPath("bin/odmoe-bench-load"))) {
    binaries.push_back("odmoe-bench-load");
  }
  for (const std::string& b : binaries) {
    INFO(b);
    const std::string bin = test::BinaryPath("bin/" + b);
    const Result help = Sh(bin + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.output.find("usage:") != std::string::npos);
    CHECK(help.output.find("--version") != std::string::npos);
    CHECK(help.output.find("--log-level LEVEL") != std::string::npos);
    const Result version = Sh(bin + " --version");
    CHECK(version.exit_code == 0);
    CHECK(version.output.find(b + " ") == 0);
    CHECK(version.output.find("(git ") != std::string::npos);
    CHECK(version.output.find("backends: cpu") != std::string::npos);
    const Result bad = Sh(bin + (b == "odmoe" ? " complete" : "") + " --no-such-flag=1");
    CHECK(bad.exit_code == CliArgs::kUsageExit);
    CHECK(bad.output.find("error: unknown option '--no-such-flag=1'") != std::string::npos);
    const Result level = Sh(bin + (b == "odmoe" ? " complete" : "") + " --log-level=loud");
    CHECK(level.exit_code == CliArgs::kUsageExit);
    CHECK(level.output.find("invalid value 'loud' for --log-level") != std::string::npos);
  }
}

TEST_CASE("docs/cli.md is every binary's current --help", "[cli]") {
  std::ifstream in(test::SourcePath("docs/cli.md"));
  REQUIRE(in);
  const std::string page((std::istreambuf_iterator<char>(in)), {});
  for (const char* b : {"odmoe", "odmoe-run", "odmoe-quantize", "odmoe-perplexity", "odmoe-synth",
                        "odmoe-cluster", "odmoe-bench", "odmoe-bench-ops", "odmoe-bench-sampling",
                        "odmoe-main", "odmoe-shadow", "odmoe-worker"}) {
    INFO(b << ": run scripts/cli_docs.sh after changing options");
    const Result help = Sh(test::BinaryPath(std::string("bin/") + b) + " --help");
    REQUIRE(help.exit_code == 0);
    const std::string block = std::string("## ") + b + "\n\n```\n" + help.output + "```\n";
    CHECK(page.find(block) != std::string::npos);
  }
}

TEST_CASE("odmoe-bench-ops: bad --types and --shapes are clear errors", "[cli]") {
  const std::string bin = test::BinaryPath("bin/odmoe-bench-ops");
  const Result type = Sh(bin + " --types q4_K,q9_Z");
  CHECK(type.exit_code == CliArgs::kUsageExit);
  CHECK(type.output.find("--types: 'q9_Z' is not a benchmarked type") != std::string::npos);
  for (const char* shape : {"4096", "16x100", "0x4096", "16x4096x2", "99999x99999"}) {
    INFO(shape);
    const Result r = Sh(bin + " --shapes " + shape);
    CHECK(r.exit_code == CliArgs::kUsageExit);
    CHECK(r.output.find("is not ROWSxCOLS") != std::string::npos);
  }
}

TEST_CASE("odmoe-run: bad arguments are clear errors", "[cli]") {
  ExpectError("--prompt hi", "missing required option --model");
  ExpectError("--model /nonexistent/model.gguf --prompt hi", "/nonexistent/model.gguf");
  ExpectError("--model " + Model() + " --prompt hi --temp -1", "temperature");
  ExpectError("--model " + Model() + " --prompt hi --top-p 0", "top_p");
  ExpectError("--model " + Model() + " --prompt hi --top-p abc", "invalid value 'abc'");
  ExpectError("--model " + Model() + " --prompt hi -n 0", "max_tokens");
  ExpectError("--model " + Model() + " --prompt hi --bogus", "unknown option '--bogus'");
}

TEST_CASE("odmoe-run: prompts and -n beyond the context are refused", "[cli]") {
  ExpectError("--model " + Model() + " --ctx 16 --prompt \"" + std::string(200, 'a') + " b c\"",
              "the context holds 16");
  ExpectError("--model " + Model() + " --ctx 32 --prompt hello -n 100", "exceeds the context");
}

TEST_CASE("odmoe-run: a prompt that is not UTF-8 is refused", "[cli]") {
  const std::string prompt = TempPath("bad_utf8.txt");
  std::ofstream(prompt, std::ios::binary) << "caf\xc3 \xff\xfe end";
  ExpectError("--model " + Model() + " --prompt-file " + prompt, "UTF-8");
  ExpectError("--model " + Model() + " --prompt-file /nonexistent/prompt.txt", "--prompt-file");
  std::filesystem::remove(prompt);
}

TEST_CASE("odmoe-run: a truncated or corrupt model file is an error, not a crash", "[cli]") {
  const std::string truncated = TempPath("truncated.gguf");
  std::filesystem::copy_file(Model(), truncated, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(Model()) / 2);
  ExpectError("--model " + truncated + " --prompt hi", truncated);

  const std::string garbage = TempPath("garbage.gguf");
  std::ofstream(garbage) << "this is not a model";
  ExpectError("--model " + garbage + " --prompt hi", garbage);
  std::filesystem::remove(truncated);
  std::filesystem::remove(garbage);
}

TEST_CASE("odmoe-run: greedy generation is deterministic and dumps experts", "[cli]") {
  const std::string dump = TempPath("experts.jsonl");
  const std::string cmd = Run() + " --model " + Model() +
                          " --prompt \"The old man\" -n 12 --ignore-eos --dump-experts " + dump;
  const Result a = Sh(cmd);
  const Result b =
      Sh(Run() + " --model " + Model() + " --prompt \"The old man\" -n 12 --ignore-eos");
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  CHECK(a.output.find("decode") != std::string::npos);
  CHECK(a.output.find("TTFT") != std::string::npos);
  // Same text before the timing line.
  CHECK(a.output.substr(0, a.output.find("prompt:")) ==
        b.output.substr(0, b.output.find("prompt:")));
  std::ifstream in(dump);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    CHECK(line.find("\"experts\":[[") != std::string::npos);
  }
  CHECK(lines > 12);  // prompt positions + 11 generated tokens fed back
  // A layer without experts (DeepSeek-V2's first) is null, the others list k ids.
  const Result ds =
      Sh(Run() + " --model " + test::SourcePath("tests/data/arch/tiny-deepseek2.gguf") +
         " --prompt \"The old man\" -n 3 --ignore-eos --dump-experts " + dump);
  INFO(ds.output);
  REQUIRE(ds.exit_code == 0);
  std::ifstream ds_in(dump);
  REQUIRE(std::getline(ds_in, line));
  CHECK(line.find("\"experts\":[null,[") != std::string::npos);
  std::filesystem::remove(dump);
}

TEST_CASE("odmoe-run: --logprobs-out writes each token's exact log-probability", "[cli]") {
  const std::string out = TempPath("logprobs.jsonl");
  const Result r = Sh(Run() + " --model " + Model() +
                      " --prompt 'The meaning of life is' -n 6 --ignore-eos --threads 1"
                      " --logprobs-out " +
                      out + " --top-logprobs 3");
  REQUIRE(r.exit_code == 0);
  auto engine = ReferenceEngine::Create(Model(), {}).value();
  GenerateRequest req;
  req.prompt = "The meaning of life is";
  req.max_tokens = 6;
  req.ignore_eos = true;
  req.logprobs = 3;
  const GenerateResult want = engine->Generate(req).value();
  std::ifstream in(out);
  std::string line;
  size_t i = 0;
  while (std::getline(in, line)) {
    INFO(line);
    REQUIRE(i < want.output_ids.size());
    const nlohmann::json j = nlohmann::json::parse(line);
    CHECK(j["i"] == i);
    CHECK(j["token"] == want.output_ids[i]);
    CHECK(j["logprob"].get<double>() == want.logprobs[i].target_logprob);
    REQUIRE(j["top"].size() == 3);
    // Greedy: the most likely token is the one generated.
    CHECK(j["top"][0][0] == want.output_ids[i]);
    for (size_t k = 0; k < 3; ++k) {
      CHECK(j["top"][k][0] == want.logprobs[i].top[k].id);
      CHECK(j["top"][k][1].get<double>() == want.logprobs[i].top[k].logprob);
    }
    ++i;
  }
  CHECK(i == 6);
  std::filesystem::remove(out);
  ExpectError("--model " + Model() + " --prompt x --logprobs-out " + out + " --top-logprobs 21",
              "at most 20 alternatives");
}

TEST_CASE("odmoe-run: seeded sampling reproduces", "[cli]") {
  const std::string cmd =
      Run() + " --model " + Model() +
      " --prompt Hello -n 16 --temperature 0.9 --top-p 0.9 --seed 11 --ignore-eos";
  const Result a = Sh(cmd), b = Sh(cmd);
  REQUIRE(a.exit_code == 0);
  CHECK(a.output.substr(0, a.output.find("prompt:")) ==
        b.output.substr(0, b.output.find("prompt:")));
}

TEST_CASE("odmoe-quantize: converts to every mix and the result runs", "[cli]") {
  for (const QuantMixInfo& mix : QuantMixes()) {
    const std::string name(mix.name);
    INFO("mix " << name);
    const std::string out = TempPath("quant-" + name + ".gguf");
    // Lower case works as well as the usual spelling.
    const std::string type = mix.mix == QuantMix::kQ8_0 ? "q8_0" : name;
    const Result q = Sh(Quantize() + " " + Model() + " " + out + " --type " + type);
    INFO(q.output);
    REQUIRE(q.exit_code == 0);
    // Not a terminal: one line per tensor, then the per-type summary.
    CHECK(q.output.find("[1/") != std::string::npos);
    CHECK(q.output.find("type      tensors         MB") != std::string::npos);
    CHECK(q.output.find("converted ") != std::string::npos);
    auto m = ModelFile::Open(out);
    REQUIRE(m.ok());
    CHECK((*m)->gguf().GetUInt("general.file_type") == mix.file_type);
    const Result r = Sh(Run() + " --model " + out + " --prompt \"The sea\" -n 8");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    std::filesystem::remove(out);
  }
  // K mixes on rows of 128 fall back, and the summary says so.
  const std::string out = TempPath("quant-fallback.gguf");
  const Result q = Sh(Quantize() + " " + Model() + " " + out + " --type q4_k_m");
  CHECK(q.output.find("fallback: output.weight: rows of 128 are not whole q6_K blocks: stored as "
                      "q8_0") != std::string::npos);
  std::filesystem::remove(out);
  // --pure and --dry-run.
  const Result dry = Sh(Quantize() + " " + Model() + " --type Q6_K --pure --dry-run");
  INFO(dry.output);
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find("blk.0.attn_v.weight                  f16      -> q8_0      (fallback "
                        "from q6_K)") != std::string::npos);
  const Result bad = Sh(Quantize() + " " + Model() + " " + out + " --type q4_k");
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("unknown --type 'q4_k' (expected one of F32, F16, BF16, Q8_0") !=
        std::string::npos);
}

TEST_CASE("odmoe-quantize: bad arguments are clear errors", "[cli]") {
  Result r = Sh(Quantize() + " " + Model() + " /tmp/x.gguf --type q5_k");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("unknown --type 'q5_k'") != std::string::npos);
  r = Sh(Quantize() + " " + Model() + " --type q8_0");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("expected two arguments") != std::string::npos);
  r = Sh(Quantize() + " /nonexistent.gguf /tmp/x.gguf --type q8_0");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("/nonexistent.gguf") != std::string::npos);
}

}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("odmoe-run: --json-schema and --grammar constrain the output", "[cli][grammar]") {
  const std::string schema = TempPath("schema.json");
  std::ofstream(schema) << R"({"type": "object", "properties": {"answer": {"enum": ["yes", "no"]},
      "n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["answer", "n"],
      "additionalProperties": false})";
  for (const char* seed : {"4", "9"}) {
    const Result r = test::Sh(Run() + " --model " + Model() + " --prompt Q: -n 300 --temperature 0.9" +
                              " --seed " + seed + " --json-schema " + schema + " 2>/dev/null");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    // The prompt, the generated text, then the statistics line.
    REQUIRE(r.output.rfind("Q:", 0) == 0);
    const size_t end = r.output.rfind('}');
    REQUIRE(end != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(r.output.substr(2, end - 1), nullptr, false);
    REQUIRE(j.is_object());
    CHECK((j["answer"] == "yes" || j["answer"] == "no"));
    CHECK(j["n"].is_number_integer());
    CHECK(j.size() == 2);
  }
  const std::string grammar = TempPath("yes_no.gbnf");
  std::ofstream(grammar) << "root ::= (\"yes\" | \"no\") \".\"\n";
  const Result r = test::Sh(Run() + " --model " + Model() + " --prompt Q: -n 20 --grammar " +
                            grammar + " 2>/dev/null");
  CHECK((r.output.rfind("Q:yes.\n", 0) == 0 || r.output.rfind("Q:no.\n", 0) == 0));

  std::ofstream(grammar) << "root ::= missing\n";
  ExpectError("--model " + Model() + " --prompt Q: --grammar " + grammar,
              "grammar: grammar line 1 column 10: undefined rule 'missing'");
  std::ofstream(schema) << R"({"type": "array", "uniqueItems": true})";
  ExpectError("--model " + Model() + " --prompt Q: --json-schema " + schema, "uniqueItems");
  ExpectError("--model " + Model() + " --prompt Q: --json-schema /nonexistent/s.json",
              "/nonexistent/s.json");
  std::filesystem::remove(schema);
  std::filesystem::remove(grammar);
}

}  // namespace
}  // namespace odmoe
