// Which tool-call syntax a model uses (main_node/tool_call_syntax.h): from
// markers in its chat template, else from its vocabulary's special tokens,
// else Hermes. The template lines are written here in each family's style
// (not copied from any model).
#include "main_node/tool_call_syntax.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace odmoe::test {
namespace {

TEST_CASE("tool call syntax: recognised from the template's markers", "[tool_calls]") {
  using S = ToolCallSyntax;
  const std::pair<std::string, S> cases[] = {
      {"{{- '<tool_call>\\n' + tool_call | tojson + '\\n</tool_call>' }}", S::kHermes},
      {"<tool_call>\n<function={{ name }}>\n<parameter={{ k }}>\n{{ v }}\n</parameter>",
       S::kQwen3Coder},
      {"{{ '[TOOL_CALLS]' + tool_calls | tojson }}", S::kMistral},
      {"{{ '[TOOL_CALLS]' + name + '[ARGS]' + arguments }}", S::kMistralArgs},
      {"{{- '<|python_tag|>' + tool_call.arguments.code }}", S::kLlama3},
      {"<|start_header_id|>assistant<|end_header_id|>{\"name\": \"{{ n }}\", \"parameters\": {{ a "
       "}}}",
       S::kLlama3},
      {"<|start|>assistant to=functions.{{ n }}<|channel|>commentary json<|message|>{{ a "
       "}}<|call|>",
       S::kHarmony},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{{ n }}\\n```json\\n{{ a "
       "}}\\n```",
       S::kDeepSeekV3},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ n }}<｜tool▁sep｜>{{ a }}<｜tool▁call▁end｜>",
       S::kDeepSeekV31},
      {"<tool_call>{{ n }}\n<arg_key>{{ k }}</arg_key>\n<arg_value>{{ v }}</arg_value>", S::kGlm45},
      {"<|tool_calls_section_begin|><|tool_call_begin|>{{ id }}<|tool_call_argument_begin|>",
       S::kKimiK2},
      {"{{ '<minimax:tool_call>' }}\n<invoke name=\"{{ n }}\">\n<parameter name=\"{{ k }}\">",
       S::kMiniMaxM2},
      {"{{- '<|tool_call>call:' + function['name'] + '{' -}}", S::kGemma4},
  };
  for (const auto& [tmpl, want] : cases) {
    INFO(tmpl);
    auto got = DetectToolCallSyntax(tmpl);
    REQUIRE(got.has_value());
    CHECK(ToolCallSyntaxName(*got) == ToolCallSyntaxName(want));
  }
}

TEST_CASE("tool call syntax: the vocabulary when the template says nothing, else hermes",
          "[tool_calls]") {
  auto vocab = [](std::set<std::string> tokens) {
    return [tokens](std::string_view t) { return tokens.count(std::string(t)) > 0; };
  };
  const std::string plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
  CHECK(DetectToolCallSyntax(plain, vocab({"<arg_key>", "<tool_call>"})) == ToolCallSyntax::kGlm45);
  CHECK(DetectToolCallSyntax(plain, vocab({"<tool_call>"})) == ToolCallSyntax::kHermes);
  CHECK(DetectToolCallSyntax(plain, vocab({"<|call|>"})) == ToolCallSyntax::kHarmony);
  CHECK(DetectToolCallSyntax(plain, vocab({"[TOOL_CALLS]", "[ARGS]"})) ==
        ToolCallSyntax::kMistralArgs);
  CHECK(DetectToolCallSyntax(plain, vocab({"<|python_tag|>"})) == ToolCallSyntax::kLlama3);
  CHECK_FALSE(DetectToolCallSyntax(plain, vocab({"<s>"})).has_value());
  CHECK_FALSE(DetectToolCallSyntax(plain).has_value());
  CHECK(ToolCallSyntaxFor(plain) == ToolCallSyntax::kHermes);
  CHECK(ToolCallSyntaxFor("", vocab({"<|tool_calls_section_begin|>"})) == ToolCallSyntax::kKimiK2);
}

TEST_CASE("tool call syntax: every syntax has one row and a name that reads back", "[tool_calls]") {
  std::set<std::string_view> names;
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    INFO(spec.name);
    CHECK(names.insert(spec.name).second);
    CHECK(ToolCallSyntaxNamed(spec.name) == spec.syntax);
    CHECK(&ToolCallSyntaxSpecOf(spec.syntax) == &spec);
    CHECK_FALSE(spec.call_begin.empty());
    CHECK_FALSE(spec.template_markers.empty());
  }
  CHECK(names.size() == 12);
  CHECK_FALSE(ToolCallSyntaxNamed("chatml").has_value());
}

TEST_CASE("tool call syntax: the published templates of the MoE families pick theirs",
          "[tool_calls]") {
  // Other projects' templates, fetched at test time by scripts/fetch_chat_templates.sh
  // (never committed); a missing one is skipped with a warning.
  const char* dir = std::getenv("ODMOE_TEMPLATES_DIR");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base =
      dir != nullptr ? std::filesystem::path(dir)
                     : std::filesystem::path(home != nullptr ? home : "") / ".cache/odmoe/chat-templates";
  const std::pair<std::string, std::string_view> cases[] = {
      {"Qwen3.5-4B.jinja", "qwen3_coder"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3_coder"},
      {"GLM-4.6.jinja", "glm45"},
      {"GLM-4.7-Flash.jinja", "glm45"},
      {"MiniMax-M2.jinja", "minimax_m2"},
      {"google-gemma-4-31B-it.jinja", "gemma4"},
      {"Kimi-K2-Instruct.jinja", "kimi_k2"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31"},
      {"openai-gpt-oss-120b.jinja", "harmony"},
  };
  for (const auto& [file, want] : cases) {
    std::ifstream in(base / file);
    if (!in.good()) {
      WARN(file << ": not fetched, skipped");
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    INFO(file);
    CHECK(ToolCallSyntaxName(ToolCallSyntaxFor(text.str())) == want);
  }
}

}  // namespace
}  // namespace odmoe::test
