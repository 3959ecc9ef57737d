// odmoe-perplexity as a user runs it: a small run on the held-out text prints
// the running estimates and the final line, the same bits whatever the
// threads and batch size; every kind of bad input is one clear error line and
// a non-zero exit.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "shell.h"
#include "test_paths.h"

namespace odmoe {
namespace {

using test::Sh;

std::string Ppl() { return test::BinaryPath("bin/odmoe-perplexity"); }
std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }
std::string HeldOut() { return test::SourcePath("tests/data/heldout.txt"); }

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("odmoe_ppl_" + name)).string();
}

void ExpectError(const std::string& args, const std::string& message) {
  const test::ShellResult r = Sh(Ppl() + " " + args);
  INFO("args: " << args << "\noutput: " << r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("odmoe-perplexity: error: ") != std::string::npos);
  CHECK(r.output.find(message) != std::string::npos);
  CHECK(r.output.find("Final estimate") == std::string::npos);
}

// The stdout lines of a run (stderr to /dev/null).
std::string Stdout(const std::string& args) {
  const test::ShellResult r = Sh("(" + Ppl() + " " + args + " 2>/dev/null)");
  INFO("args: " << args << "\noutput: " << r.output);
  REQUIRE(r.exit_code == 0);
  return r.output;
}

}  // namespace

TEST_CASE("odmoe-perplexity: a small run on the held-out text", "[cli][perplexity]") {
  const std::string top1 = TempPath("top1.txt");
  const std::string base = "--model " + Model() + " --file " + HeldOut() + " --ctx 64 --chunks 4";
  const test::ShellResult r = Sh(Ppl() + " " + base + " --top1-out " + top1);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m,
                            std::regex(R"(Final estimate: PPL = (\d+\.\d{4}) \+/- \d+\.\d{5})")));
  const double ppl = std::stod(m[1]);
  CHECK(ppl > 1.0);
  CHECK(ppl < 2048.0);  // better than uniform over the vocabulary
  CHECK(r.output.find("4 chunks of 64") != std::string::npos);
  CHECK(r.output.find("chunk 4/4") != std::string::npos);
  CHECK(r.output.find("tokens/s") != std::string::npos);

  // One line per scored position: 4 chunks x (64 - 1 - 32), after a header.
  std::ifstream in(top1);
  std::string line;
  int lines = 0;
  std::getline(in, line);
  CHECK(line.rfind("# chunk", 0) == 0);
  while (std::getline(in, line)) ++lines;
  CHECK(lines == 4 * 31);
  std::filesystem::remove(top1);

  // stdout alone: the running estimates on one line, then the final line;
  // the same bits with one thread and another batch split.
  const std::string a = Stdout(base);
  const std::regex estimates(
      R"(^\[1\]\d+\.\d{4},\[2\]\d+\.\d{4},\[3\]\d+\.\d{4},\[4\]\d+\.\d{4},\n)"
      R"(Final estimate: PPL = \d+\.\d{4} \+/- \d+\.\d{5}\n$)");
  CHECK(std::regex_search(a, estimates));
  CHECK(a.find(m[0].str()) != std::string::npos);
  CHECK(a == Stdout(base + " --threads 1 --batch 7"));
  // The default (--batch 2048) scores the 4 chunks in one pass; 2 per pass
  // and 1 per pass give the same bits.
  CHECK(a == Stdout(base + " --batch 130"));
  CHECK(a == Stdout(base + " --batch 64"));
  const test::ShellResult passes = Sh(Ppl() + " " + base + " --batch 130");
  CHECK(passes.output.find("2 chunks per pass") != std::string::npos);
}

TEST_CASE("odmoe-perplexity: bad input is one clear error", "[cli][perplexity]") {
  const std::string model = "--model " + Model();
  ExpectError(model, "missing required option --file");
  ExpectError("--file " + HeldOut(), "give --model FILE (one process) or --main HOST:PORT");
  ExpectError(model + " --main 127.0.0.1:7700 --file " + HeldOut(), "exactly one");
  ExpectError(model + " --file /nonexistent/text.txt",
              "cannot read --file '/nonexistent/text.txt'");

  const std::string empty = TempPath("empty.txt");
  std::ofstream(empty).close();
  ExpectError(model + " --file " + empty, "is empty");
  const std::string short_text = TempPath("short.txt");
  std::ofstream(short_text) << "A few words only.";
  ExpectError(model + " --file " + short_text + " --ctx 64", "fewer than one chunk of 64");
  ExpectError(model + " --file " + HeldOut() + " --ctx 1024",
              "--ctx 1024 exceeds the context of 512 tokens");
  ExpectError(model + " --file " + HeldOut() + " --ctx 2", "--ctx must be at least 4");
  ExpectError(model + " --file " + HeldOut() + " --ctx -1", "--ctx must be >= 0");
  ExpectError(model + " --file " + HeldOut() + " --chunks -1", "--chunks must be >= 0");
  ExpectError(model + " --file " + HeldOut() + " --batch -1", "--batch must be >= 1");
  ExpectError(model + " --file " + HeldOut() + " --batch 0", "--batch must be >= 1");
  ExpectError(model + " --file " + HeldOut() + " --ctx abc", "invalid value 'abc'");
  ExpectError(model + " --file " + HeldOut() + " --backend nosuch", "nosuch");
  ExpectError("--model /nonexistent/m.gguf --file " + HeldOut(), "/nonexistent/m.gguf");
  const std::string garbage = TempPath("garbage.gguf");
  std::ofstream(garbage) << "this is not a model";
  ExpectError("--model " + garbage + " --file " + HeldOut(), garbage);
  ExpectError(model + " --file " + HeldOut() + " --ctx 64 --chunks 1 --top1-out /nonexistent/dir/x",
              "cannot write --top1-out");
  // Nothing listens on port 1.
  ExpectError("--main 127.0.0.1:1 --file " + HeldOut(), "main node at 127.0.0.1:1");
  std::filesystem::remove(empty);
  std::filesystem::remove(short_text);
  std::filesystem::remove(garbage);
}

}  // namespace odmoe
