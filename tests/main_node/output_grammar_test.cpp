// main_node/output_grammar.h: what a request body asks the output to look
// like, as the grammar the engine enforces; checked by running the grammar.
#include "main_node/output_grammar.h"

#include <catch2/catch.hpp>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "main_node/tool_call_parser.h"

namespace odmoe {
namespace {

using ojson = nlohmann::ordered_json;

std::string GrammarOf(const std::string& body_text,
                      ToolCallSyntax syntax = ToolCallSyntax::kHermes) {
  const ojson body = ojson::parse(body_text);
  absl::StatusOr<ToolRequest> tools = ParseToolRequest(body);
  REQUIRE(tools.ok());
  absl::StatusOr<std::string> g = OutputGrammar(body, *tools, syntax);
  INFO(g.status().message());
  REQUIRE(g.ok());
  return *g;
}

std::string ErrorOf(const std::string& body_text) {
  const ojson body = ojson::parse(body_text);
  absl::StatusOr<ToolRequest> tools = ParseToolRequest(body);
  if (!tools.ok()) return std::string(tools.status().message());
  absl::StatusOr<std::string> g = OutputGrammar(body, *tools, ToolCallSyntax::kHermes);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

// Whether the grammar matches `text` whole.
bool Matches(const std::string& gbnf, std::string_view text) {
  absl::StatusOr<std::shared_ptr<const Grammar>> g = ParseGbnf(gbnf);
  INFO(gbnf);
  REQUIRE(g.ok());
  GrammarMatcher m(*g);
  return m.AcceptBytes(text) && m.Complete();
}

TEST_CASE("output grammar: nothing asked, text, json_object, json_schema", "[output_grammar]") {
  CHECK(GrammarOf(R"({"messages": []})").empty());
  CHECK(GrammarOf(R"({"response_format": {"type": "text"}})").empty());
  CHECK(GrammarOf(R"({"response_format": null, "grammar": null})").empty());

  const std::string object = GrammarOf(R"({"response_format": {"type": "json_object"}})");
  CHECK(Matches(object, R"({"a": [1, 2.5, "x", null, true]})"));
  CHECK_FALSE(Matches(object, "[1]"));
  CHECK_FALSE(Matches(object, "hello"));

  // Properties in the schema's order (the body is parsed in order).
  const std::string schema = GrammarOf(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "w", "strict": true, "schema": {"type": "object",
      "properties": {"zone": {"type": "string"}, "celsius": {"type": "integer"}},
      "required": ["zone", "celsius"], "additionalProperties": false}}}})");
  CHECK(Matches(schema, R"({"zone": "Oslo", "celsius": -3})"));
  CHECK_FALSE(Matches(schema, R"({"celsius": -3, "zone": "Oslo"})"));
  CHECK_FALSE(Matches(schema, R"({"zone": "Oslo"})"));
  CHECK_FALSE(Matches(schema, R"({"zone": "Oslo", "celsius": 1.5})"));

  // llama-server's fields: a schema, and GBNF as given.
  const std::string ls =
      GrammarOf(R"({"json_schema": {"type": "array", "items": {"type": "boolean"},
      "maxItems": 2}})");
  CHECK(Matches(ls, "[true, false]"));
  CHECK_FALSE(Matches(ls, "[true, false, true]"));
  CHECK(GrammarOf(R"({"grammar": "root ::= \"yes\" | \"no\""})") == "root ::= \"yes\" | \"no\"");
}

TEST_CASE("output grammar: a required or named tool call in the model's syntax",
          "[output_grammar]") {
  const std::string tools = R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}])";
  CHECK(GrammarOf("{" + tools + R"(, "tool_choice": "auto"})").empty());
  CHECK(GrammarOf("{" + tools + R"(, "tool_choice": "none"})").empty());

  const std::string required = GrammarOf("{" + tools + R"(, "tool_choice": "required"})");
  CHECK(Matches(
      required,
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>"));
  CHECK_FALSE(Matches(required, "Sure! <tool_call>"));
  CHECK_FALSE(Matches(
      required,
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"UTC\"}}\n</tool_call>"));

  const std::string named =
      GrammarOf("{" + tools +
                R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})");
  CHECK(Matches(named,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                "\"Rome\"}}\n</tool_call>"));
  CHECK_FALSE(Matches(
      named,
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>"));

  // Another family's syntax: the same choice in Qwen3-Coder's XML form.
  const std::string xml =
      GrammarOf("{" + tools + R"(, "tool_choice": "required"})", ToolCallSyntax::kQwen3Coder);
  CHECK(Matches(xml,
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
                "</function>\n</tool_call>"));

  // Gemma 4's notation, with the real JSON Schema compiler for other values:
  // what its template writes for the call matches, and it parses back.
  const std::string gemma_tools = R"("tools": [
      {"type": "function", "function": {"name": "plan", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                       "opts": {"type": "object", "properties": {"metric": {"type": "boolean"}}},
                       "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["city", "days"]}}}])";
  const std::string gemma =
      GrammarOf("{" + gemma_tools + R"(, "tool_choice": "required"})", ToolCallSyntax::kGemma4);
  const std::string call = "<|tool_call>call:plan{city:<|\"|>Rome<|\"|>,days:3}<tool_call|>";
  CHECK(Matches(gemma, call));
  CHECK(Matches(gemma,
                "<|tool_call>call:plan{city:<|\"|>Rome, <it>|<|\"|>,days:-2,opts:{\"metric\": "
                "true},tags:[\"a\", \"b\"]}<tool_call|>"));
  CHECK_FALSE(Matches(gemma, "<|tool_call>call:plan{days:3,city:<|\"|>Rome<|\"|>}<tool_call|>"));
  CHECK_FALSE(Matches(gemma, "<|tool_call>call:plan{city:<|\"|>Rome<|\"|>}<tool_call|>"));
  CHECK_FALSE(Matches(gemma, "<|tool_call>call:plan{city:<|\"|>Ro<|me<|\"|>,days:3}<tool_call|>"));
  ToolRequest parsed_tools = *ParseToolRequest(ojson::parse("{" + gemma_tools + "}"));
  const ParsedReply r = ParseToolCalls(ToolCallSyntax::kGemma4,
                                       "<|tool_call>call:plan{city:<|\"|>Rome, <it>|<|\"|>,days:-2,"
                                       "opts:{\"metric\": true},tags:[\"a\", \"b\"]}<tool_call|>",
                                       parsed_tools.tools, 1);
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].arguments ==
        R"({"city": "Rome, <it>|", "days": -2, "opts": {"metric": true}, "tags": ["a", "b"]})");
}

TEST_CASE("output grammar: errors name the field", "[output_grammar]") {
  CHECK(ErrorOf(R"({"response_format": {"type": "xml"}})") ==
        "response_format.type: expected one of text, json_object, json_schema");
  CHECK(ErrorOf(R"({"response_format": "json"})") == "response_format: expected an object");
  CHECK(ErrorOf(R"({"response_format": {"type": "json_schema"}})") ==
        "response_format.json_schema: expected an object with a schema");
  CHECK(ErrorOf(R"({"json_schema": 3})") == "json_schema: expected an object");
  CHECK(ErrorOf(R"({"grammar": 3})") == "grammar: expected GBNF text");
  const std::string unsupported = ErrorOf(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}})");
  CHECK(unsupported.rfind("response_format.json_schema.schema /uniqueItems", 0) == 0);
  CHECK(ErrorOf(R"({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})")
            .rfind("response_format: cannot be combined with grammar", 0) == 0);
  CHECK(ErrorOf(R"({"response_format": {"type": "json_object"}, "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "f"}}]})")
            .rfind("tool_choice: cannot be combined with response_format", 0) == 0);
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("output grammar: markers that are control tokens are named as tokens",
          "[output_grammar]") {
  // Kimi-K2's markers are control tokens of its vocabulary: a required call
  // names them (<|...|>), so only the tokens themselves match, never text
  // spelling them (grammar.h kTokenMark).
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(R"({"tools": [
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
        "properties": {"zone": {"enum": ["UTC"]}}, "required": ["zone"]}}}],
      "tool_choice": "required", "parallel_tool_calls": false})");
  absl::StatusOr<ToolRequest> tools = ParseToolRequest(body);
  REQUIRE(tools.ok());
  auto is_control = [](std::string_view t) { return t.size() > 4 && t.substr(0, 2) == "<|"; };
  absl::StatusOr<std::string> g = OutputGrammar(body, *tools, ToolCallSyntax::kKimiK2, is_control);
  REQUIRE(g.ok());
  INFO(*g);
  CHECK(g->find("<|tool_calls_section_begin|>") != std::string::npos);
  CHECK(g->find("\"<|tool_calls_section_begin|>\"") == std::string::npos);
  auto token = [](std::string_view text) {
    return std::string(1, kTokenMark) + std::string(text) + kTokenMark;
  };
  const std::string as_tokens = token("<|tool_calls_section_begin|>") +
                                token("<|tool_call_begin|>") + "functions.get_time:0" +
                                token("<|tool_call_argument_begin|>") + "{\"zone\": \"UTC\"}" +
                                token("<|tool_call_end|>") + token("<|tool_calls_section_end|>");
  CHECK(Matches(*g, as_tokens));
  CHECK_FALSE(Matches(*g,
                      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
                      "<|tool_call_argument_begin|>{\"zone\": \"UTC\"}<|tool_call_end|>"
                      "<|tool_calls_section_end|>"));
  // gpt-oss: <|channel|>, <|constrain|>, <|message|> and <|call|> are tokens
  // inside the canonical call text; each is named as the token.
  g = OutputGrammar(body, *tools, ToolCallSyntax::kHarmony, is_control);
  REQUIRE(g.ok());
  CHECK(Matches(*g, token("<|channel|>") + "commentary to=functions.get_time " +
                        token("<|constrain|>") + "json" + token("<|message|>") +
                        "{\"zone\": \"UTC\"}" + token("<|call|>")));
  CHECK_FALSE(Matches(*g,
                      "<|channel|>commentary to=functions.get_time <|constrain|>json"
                      "<|message|>{\"zone\": \"UTC\"}<|call|>"));
  g = OutputGrammar(body, *tools, ToolCallSyntax::kKimiK2, is_control);
  REQUIRE(g.ok());
  // Without the vocabulary's word, the markers are text.
  g = OutputGrammar(body, *tools, ToolCallSyntax::kKimiK2);
  REQUIRE(g.ok());
  CHECK_FALSE(Matches(*g, as_tokens));
}

}  // namespace
}  // namespace odmoe
