// The tool fields of a chat request (main_node/tool_request.h): OpenAI's
// shapes accepted with their defaults, every mistake an INVALID_ARGUMENT that
// names the field.
#include "main_node/tool_request.h"

#include <catch2/catch.hpp>
#include <string>

namespace odmoe::test {
namespace {

using json = nlohmann::json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "search", "strict": true}}])";

json Body(const std::string& extra) {
  return json::parse(std::string("{\"tools\": ") + kTools + (extra.empty() ? "" : ", " + extra) +
                     "}");
}

TEST_CASE("tool request: the OpenAI shapes and their defaults", "[tool_calls]") {
  auto none = ParseToolRequest(json::parse(R"({"messages": []})"));
  REQUIRE(none.ok());
  CHECK(none->tools.empty());
  CHECK(none->choice.kind == ToolChoiceKind::kNone);
  CHECK(none->parallel);

  auto r = ParseToolRequest(Body(""));
  REQUIRE(r.ok());
  REQUIRE(r->tools.size() == 2);
  CHECK(r->tools[0].name == "get_weather");
  CHECK(r->tools[0].description == "Weather");
  CHECK(r->tools[0].parameters.at("properties").contains("city"));
  CHECK(r->tools[1].parameters ==
        nlohmann::ordered_json::parse(R"({"type": "object", "properties": {}})"));
  // A body parsed in order keeps the properties' order (the grammar and the
  // tagged syntaxes write them in it).
  auto ordered = ParseToolRequest(nlohmann::ordered_json::parse(
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
          {"type": "object", "properties": {"zeta": {}, "alpha": {}}}}}]})"));
  REQUIRE(ordered.ok());
  CHECK(ordered->tools[0].parameters.at("properties").begin().key() == "zeta");
  CHECK(r->tools[1].strict);
  CHECK(r->choice.kind == ToolChoiceKind::kAuto);
  CHECK(r->Find("search") == &r->tools[1]);
  CHECK(r->Find("nope") == nullptr);

  const std::pair<const char*, ToolChoiceKind> choices[] = {
      {R"("tool_choice": "auto")", ToolChoiceKind::kAuto},
      {R"("tool_choice": "none")", ToolChoiceKind::kNone},
      {R"("tool_choice": "required")", ToolChoiceKind::kRequired},
      {R"("tool_choice": null)", ToolChoiceKind::kAuto},
      {R"("tool_choice": {"type": "function", "function": {"name": "search"}})",
       ToolChoiceKind::kNamed}};
  for (const auto& [extra, kind] : choices) {
    INFO(extra);
    auto c = ParseToolRequest(Body(extra));
    REQUIRE(c.ok());
    CHECK(c->choice.kind == kind);
    CHECK(ToolChoiceKindName(kind) != std::string());
  }
  auto named =
      ParseToolRequest(Body(R"("tool_choice": {"type": "function", "function": {"name": "search"}},
                                        "parallel_tool_calls": false)"));
  REQUIRE(named.ok());
  CHECK(named->choice.name == "search");
  CHECK_FALSE(named->parallel);
}

TEST_CASE("tool request: mistakes name their field", "[tool_calls]") {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"tools": {}})", "tools: expected an array"},
      {R"({"tools": [1]})", "tools[0]: expected an object"},
      {R"({"tools": [{"type": "retrieval"}]})", "tools[0].type: expected \"function\""},
      {R"({"tools": [{"type": "function"}]})", "tools[0].function: expected an object"},
      {R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})",
       "tools[0].function.name: expected 1 to 64 characters"},
      {R"({"tools": [{"type": "function", "function": {"name": ""}}]})",
       "tools[0].function.name: expected"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})",
       "tools[0].function.parameters: expected a JSON Schema object"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "description": 3}}]})",
       "tools[0].function.description: expected a string"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}},
                     {"type": "function", "function": {"name": "f"}}]})",
       "tools[1].function.name: 'f' names two tools"},
      {R"({"tool_choice": "required"})", "tool_choice: \"required\" needs at least one tool"},
      {R"({"tool_choice": "sometimes"})", "tool_choice: expected \"auto\""},
      {R"({"tool_choice": 1})", "tool_choice: expected"},
      {R"({"tool_choice": {"type": "function", "function": {"name": "x"}}})",
       "tool_choice: no tool named 'x'"},
      {R"({"tool_choice": {"type": "function"}})",
       "tool_choice.function: expected an object {name}"},
      {R"({"tool_choice": {"type": "other"}})", "tool_choice.type: expected \"function\""},
      {R"({"parallel_tool_calls": "yes"})", "parallel_tool_calls: expected a boolean"},
  };
  for (const auto& [body, message] : cases) {
    INFO(body);
    auto r = ParseToolRequest(json::parse(body));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(r.status().message()).rfind(message, 0) == 0);
  }
  json many = json::array();
  for (size_t i = 0; i <= kMaxTools; ++i) {
    many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  }
  auto r = ParseToolRequest(json{{"tools", many}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) == "tools: at most 128 tools, got 129");
}

}  // namespace
}  // namespace odmoe::test
