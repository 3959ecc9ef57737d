// The grammar that enforces tool_choice required / named
// (main_node/tool_call_grammar.h), with a stand-in for the JSON Schema
// compiler: the wrapper text per syntax, the rule names, the errors; and the
// canonical text each syntax's grammar forces parses back as that call.
#include "main_node/tool_call_grammar.h"

#include <catch2/catch.hpp>
#include <string>

#include "main_node/tool_call_parser.h"
#include "tool_call_test_tools.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

// std::string_view, std::string and literals joined (absl::StrCat here takes
// absl::string_view, which is not std::string_view).
template <typename... T>
std::string Cat(const T&... parts) {
  std::string out;
  ((out += parts), ...);
  return out;
}

// A stand-in compiler: one rule naming the schema's type.
absl::StatusOr<std::string> FakeRules(const json& schema, std::string_view prefix) {
  if (schema.contains("x-refuse")) return absl::InvalidArgumentError("refused");
  return Cat(prefix, " ::= \"<", schema.value("type", std::string("?")), ">\"\n");
}

ToolChoice Choice(ToolChoiceKind kind, std::string name = "") { return {kind, std::move(name)}; }

TEST_CASE("tool call grammar: hermes, required, parallel", "[tool_calls]") {
  auto g = ToolCallGrammar(ToolCallSyntax::kHermes, TestTools(), Choice(ToolChoiceKind::kRequired),
                           true, FakeRules);
  REQUIRE(g.ok());
  CHECK(*g ==
        "root ::= tool-calls\n"
        "tool-calls ::= tool-call (\"\\n\" tool-call)*\n"
        "tool-call ::= tool-0 | tool-1\n"
        "tool-0 ::= \"<tool_call>\\n{\\\"name\\\": \\\"\" \"get_weather\" \"\\\", "
        "\\\"arguments\\\": \" tool-0-args "
        "\"}\\n</tool_call>\"\n"
        "tool-0-args ::= \"<object>\"\n"
        "tool-1 ::= \"<tool_call>\\n{\\\"name\\\": \\\"\" \"search\" \"\\\", \\\"arguments\\\": \" "
        "tool-1-args "
        "\"}\\n</tool_call>\"\n"
        "tool-1-args ::= \"<object>\"\n");
}

TEST_CASE("tool call grammar: kimi_k2, a named tool is one call", "[tool_calls]") {
  auto g = ToolCallGrammar(ToolCallSyntax::kKimiK2, TestTools(),
                           Choice(ToolChoiceKind::kNamed, "search"), true, FakeRules);
  REQUIRE(g.ok());
  CHECK(*g ==
        "root ::= \"<|tool_calls_section_begin|>\" tool-calls \"<|tool_calls_section_end|>\"\n"
        "tool-calls ::= tool-call\n"
        "tool-call ::= tool-1\n"
        "tool-1 ::= \"<|tool_call_begin|>functions.\" \"search\" \":\" [0-9]+ "
        "\"<|tool_call_argument_begin|>\" "
        "tool-1-args \"<|tool_call_end|>\"\n"
        "tool-1-args ::= \"<object>\"\n");
}

TEST_CASE("tool call grammar: qwen3_coder's parameters typed, the required ones mandatory",
          "[tool_calls]") {
  auto g = ToolCallGrammar(ToolCallSyntax::kQwen3Coder, TestTools(),
                           Choice(ToolChoiceKind::kNamed, "get_weather"), false, FakeRules);
  REQUIRE(g.ok());
  CHECK(*g ==
        "root ::= tool-calls\n"
        "tool-calls ::= tool-call\n"
        "tool-call ::= tool-0\n"
        "tool-0 ::= \"<tool_call>\\n<function=\" \"get_weather\" \">\\n\" tool-0-args "
        "\"</function>\\n</tool_call>\"\n"
        "tool-0-p-0-value ::= (([^<] | \"<\" [^/])*)\n"
        "tool-0-p-0 ::= \"<parameter=\" \"city\" \">\\n\" tool-0-p-0-value \"\\n</parameter>\\n\"\n"
        "tool-0-p-1-value ::= \"<integer>\"\n"
        "tool-0-p-1 ::= \"<parameter=\" \"days\" \">\\n\" tool-0-p-1-value \"\\n</parameter>\\n\"\n"
        "tool-0-p-2-value ::= ((\"C\" | \"F\"))\n"
        "tool-0-p-2 ::= \"<parameter=\" \"unit\" \">\\n\" tool-0-p-2-value \"\\n</parameter>\\n\"\n"
        "tool-0-args ::= tool-0-p-0 tool-0-p-1? tool-0-p-2?\n");
}

TEST_CASE("tool call grammar: gemma4's notation, keys sorted, commas only between members",
          "[tool_calls][gemma]") {
  std::vector<ToolDefinition> tools = TestTools();
  tools[0].parameters["properties"]["a b"] = {{"type", "string"}};  // not a bare key
  auto g = ToolCallGrammar(ToolCallSyntax::kGemma4, tools,
                           Choice(ToolChoiceKind::kNamed, "get_weather"), false, FakeRules);
  REQUIRE(g.ok());
  CHECK(*g ==
        "root ::= tool-calls\n"
        "tool-calls ::= tool-call\n"
        "tool-call ::= tool-0\n"
        "tool-0 ::= \"<|tool_call>call:\" \"get_weather\" tool-0-args \"<tool_call|>\"\n"
        "tool-0-args-m-0-value ::= \"<|\\\"|>\" (([^<] | \"<\" [^|])*) \"<|\\\"|>\"\n"
        "tool-0-args-m-0 ::= \"<|\\\"|>\" \"a b\" \"<|\\\"|>\" \":\" tool-0-args-m-0-value\n"
        "tool-0-args-t-0 ::= tool-0-args-m-0 tool-0-args-u-1 | tool-0-args-t-1\n"
        "tool-0-args-u-0 ::= (\",\" tool-0-args-m-0)? tool-0-args-u-1\n"
        "tool-0-args-m-1-value ::= \"<|\\\"|>\" (([^<] | \"<\" [^|])*) \"<|\\\"|>\"\n"
        "tool-0-args-m-1 ::= \"city\" \":\" tool-0-args-m-1-value\n"
        "tool-0-args-t-1 ::= tool-0-args-m-1 tool-0-args-u-2\n"
        "tool-0-args-u-1 ::= \",\" tool-0-args-m-1 tool-0-args-u-2\n"
        "tool-0-args-m-2-value ::= \"<integer>\"\n"
        "tool-0-args-m-2 ::= \"days\" \":\" tool-0-args-m-2-value\n"
        "tool-0-args-t-2 ::= tool-0-args-m-2 tool-0-args-u-3 | tool-0-args-t-3\n"
        "tool-0-args-u-2 ::= (\",\" tool-0-args-m-2)? tool-0-args-u-3\n"
        "tool-0-args-m-3-value ::= \"<|\\\"|>\" ((\"C\" | \"F\")) \"<|\\\"|>\"\n"
        "tool-0-args-m-3 ::= \"unit\" \":\" tool-0-args-m-3-value\n"
        "tool-0-args-t-3 ::= tool-0-args-m-3 tool-0-args-u-4 | tool-0-args-t-4\n"
        "tool-0-args-u-3 ::= (\",\" tool-0-args-m-3)? tool-0-args-u-4\n"
        "tool-0-args-t-4 ::= \"\"\n"
        "tool-0-args-u-4 ::= \"\"\n"
        "tool-0-args ::= \"{\" tool-0-args-t-0 \"}\"\n");
}

TEST_CASE("tool call grammar: auto and none constrain nothing, errors name the field",
          "[tool_calls]") {
  for (ToolChoiceKind kind : {ToolChoiceKind::kAuto, ToolChoiceKind::kNone}) {
    auto g = ToolCallGrammar(ToolCallSyntax::kHermes, TestTools(), Choice(kind), true, FakeRules);
    REQUIRE(g.ok());
    CHECK(g->empty());
  }
  auto unknown = ToolCallGrammar(ToolCallSyntax::kHermes, TestTools(),
                                 Choice(ToolChoiceKind::kNamed, "x"), true, FakeRules);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message() == "tool_choice: no tool named 'x'");
  auto none = ToolCallGrammar(ToolCallSyntax::kHermes, {}, Choice(ToolChoiceKind::kRequired), true,
                              FakeRules);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == absl::StatusCode::kInvalidArgument);
  std::vector<ToolDefinition> tools = TestTools();
  tools[1].parameters["x-refuse"] = true;
  auto refused = ToolCallGrammar(ToolCallSyntax::kHermes, tools, Choice(ToolChoiceKind::kRequired),
                                 true, FakeRules);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "tools[1].function.parameters: refused");
  tools = TestTools();
  tools[0].parameters["properties"]["days"]["x-refuse"] = true;
  refused = ToolCallGrammar(ToolCallSyntax::kGlm45, tools, Choice(ToolChoiceKind::kRequired), true,
                            FakeRules);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() == "tools[0].function.parameters.properties.days: refused");
  CHECK(GbnfLiteral("a\"b\\c\nd\te\r") == "\"a\\\"b\\\\c\\nd\\te\\r\"");
}

TEST_CASE("tool call grammar: the text each syntax's grammar forces parses back", "[tool_calls]") {
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    INFO(spec.name);
    const bool tagged = spec.name_shape == ToolCallNameShape::kText &&
                        spec.args_shape == ToolCallArgsShape::kTagged;
    auto call = [&](const std::string& name, int index, const std::string& key,
                    const std::string& value) {
      std::string args = tagged ? Cat(spec.tags.key_open, key, spec.tags.grammar_after_key, value,
                                      spec.tags.grammar_after_value)
                                : Cat("{\"", key, "\": \"", value, "\"}");
      return Cat(spec.grammar_call_open, name,
                 spec.grammar_name_index ? ":" + std::to_string(index) : "",
                 spec.grammar_name_close, args, spec.grammar_call_close);
    };
    const std::string text =
        Cat(spec.grammar_section_open, call("get_weather", 0, "city", "Paris"),
            spec.grammar_separator, call("search", 1, "query", "moe"), spec.grammar_section_close);
    INFO(text);
    const ParsedReply r = ParseToolCalls(spec.syntax, text, TestTools(), 1);
    CHECK(r.content.empty());
    REQUIRE(r.tool_calls.size() == 2);
    CHECK(r.tool_calls[0].name == "get_weather");
    CHECK(json::parse(r.tool_calls[0].arguments) == json{{"city", "Paris"}});
    CHECK(r.tool_calls[1].name == "search");
    CHECK(json::parse(r.tool_calls[1].arguments) == json{{"query", "moe"}});
  }
}

}  // namespace
}  // namespace odmoe::test
