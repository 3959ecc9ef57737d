// odmoe template: a conversation rendered with a model's chat template,
// printed exactly (no newline added), without a cluster.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "shell.h"
#include "test_paths.h"

namespace odmoe::test {
namespace {

// A file under the build tree's test cache with `text`; its path.
std::string Write(const std::string& name, const std::string& text) {
  const std::filesystem::path dir = BinaryPath("test-cache/template-cli");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << text;
  return (dir / name).string();
}

std::string Odmoe(const std::string& args) { return BinaryPath("bin/odmoe") + " template " + args; }

TEST_CASE("odmoe template: prints the prompt exactly", "[tools][template]") {
  const std::string model = SourcePath("tests/data/arch/tiny-qwen3moe.gguf");
  const std::string messages = Write("user.json", R"([{"role": "user", "content": "Hi"}])");
  ShellResult r = Sh(Odmoe("--model " + model + " --messages " + messages +
                           " --kwargs '{\"enable_thinking\": false}'"));
  CHECK(r.exit_code == 0);
  CHECK(r.output ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");

  r = Sh(Odmoe("--model " + model + " --messages " + messages + " --no-generation-prompt"));
  CHECK(r.exit_code == 0);
  CHECK(r.output == "<|im_start|>user\nHi<|im_end|>\n");

  // Tools reach the template as written (key order kept by tojson).
  const std::string tools = Write(
      "tools.json",
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  r = Sh(Odmoe("--model " + model + " --messages " + messages + " --tools " + tools));
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                      "\"parameters\": {\"type\": \"object\"}}}\n</tools>") != std::string::npos);

  // A chat request body works as the messages file, with its own tools.
  const std::string body = Write(
      "body.json",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null,
          "tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "21 C"}]})");
  r = Sh(Odmoe("--model " + model + " --messages " + body + " --no-generation-prompt"));
  CHECK(r.exit_code == 0);
  CHECK(r.output.find(
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call>") != std::string::npos);
  CHECK(r.output.find("<tool_response>\n21 C\n</tool_response>") != std::string::npos);
}

TEST_CASE("odmoe template: --template with --bos and --eos", "[tools][template]") {
  const std::string messages = Write("two.json", R"([{"role": "user", "content": "a"},
                                                     {"role": "assistant", "content": "b"}])");
  const std::string tmpl =
      Write("t.jinja",
            "{{ bos_token }}{% for m in messages %}{{ m.role }}={{ m.content }}"
            "{{ eos_token }}{% endfor %}\n");
  ShellResult r =
      Sh(Odmoe("--template " + tmpl + " --bos '<s>' --eos '</s>' --messages " + messages));
  CHECK(r.exit_code == 0);
  CHECK(r.output == "<s>user=a</s>assistant=b</s>");  // jinja2 drops one final newline
}

TEST_CASE("odmoe template: bad templates and conversations fail with the line",
          "[tools][template]") {
  const std::string messages = Write("one.json", R"([{"role": "user", "content": "a"}])");
  ShellResult r = Sh(Odmoe("--template " + Write("bad.jinja", "x\n{% include 'y' %}") +
                           " --messages " + messages));
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("chat template line 2: unsupported tag 'include'") != std::string::npos);
  r = Sh(Odmoe("--template " + Write("raise.jinja", "{{ raise_exception('only assistants') }}") +
               " --messages " + messages));
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("raise_exception: only assistants") != std::string::npos);
  r = Sh(Odmoe("--messages " + messages));
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("one of --model and --template") != std::string::npos);
  r = Sh(
      Odmoe("--template " + Write("ok.jinja", "x") + " --messages " + Write("notjson.json", "[")));
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("not JSON") != std::string::npos);
}

}  // namespace
}  // namespace odmoe::test
