// ParseChatMessages: what a chat body's messages and template inputs become
// (main_node/http_request.h), and the 400s that name the field.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "main_node/http_request.h"

namespace odmoe {
namespace {

using ojson = nlohmann::ordered_json;

struct Parsed {
  absl::Status status;
  std::vector<ChatMessage> messages;
  ChatOptions options;
};

Parsed Parse(const std::string& body) {
  Parsed p;
  p.status = ParseChatMessages(ojson::parse(body), &p.messages, &p.options);
  return p;
}

std::string Error(const std::string& body) {
  Parsed p = Parse(body);
  REQUIRE_FALSE(p.status.ok());
  CHECK(p.status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(p.status.message());
}

TEST_CASE("chat messages: tool calls, the tool role, content null and parts", "[main_node][chat]") {
  Parsed p = Parse(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "reasoning_content": "think", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [2]}"}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}},
        {"type": "function", "function": {"name": "h", "arguments": {"k": "v"}}}]},
      {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"}]})");
  REQUIRE(p.status.ok());
  REQUIRE(p.messages.size() == 3);
  REQUIRE(p.messages[0].content_parts);
  CHECK(p.messages[0].content_parts->size() == 2);
  const ChatMessage& a = p.messages[1];
  CHECK(a.content_null);
  CHECK(a.reasoning_content == "think");
  REQUIRE(a.tool_calls.size() == 3);
  CHECK(a.tool_calls[0].id == "c1");
  CHECK(a.tool_calls[0].name == "f");
  CHECK(a.tool_calls[0].arguments.dump() == R"({"z":1,"a":[2]})");  // a dict, in the sent order
  CHECK(a.tool_calls[1].arguments == "not json");                   // kept as the string
  CHECK(a.tool_calls[2].arguments.dump() == R"({"k":"v"})");
  CHECK(p.messages[2].role == "tool");
  CHECK(p.messages[2].tool_call_id == "c1");
  CHECK(p.messages[2].name == "f");
  CHECK(p.messages[2].content == "42");
}

TEST_CASE("chat messages: tools, documents, kwargs and add_generation_prompt reach the options",
          "[main_node][chat]") {
  Parsed p = Parse(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2}}}],
      "documents": [{"title": "t", "text": "d"}], "add_generation_prompt": false,
      "reasoning_effort": "low",
      "chat_template_kwargs": {"enable_thinking": false, "thinking_budget": 512, "custom": {"y": 1, "x": 2}}})");
  REQUIRE(p.status.ok());
  CHECK(p.options.tools.dump() ==
        R"([{"type":"function","function":{"name":"f","parameters":{"b":1,"a":2}}}])");
  CHECK(p.options.documents.size() == 1);
  CHECK_FALSE(p.options.add_generation_prompt);
  CHECK(p.options.enable_thinking == false);
  CHECK(p.options.reasoning_effort == "low");
  CHECK(p.options.template_kwargs.dump() == R"({"thinking_budget":512,"custom":{"y":1,"x":2}})");
}

TEST_CASE("chat messages: what cannot reach a template is a 400 naming the field",
          "[main_node][chat]") {
  CHECK(Error(R"({"messages": "hi"})").starts_with("messages:"));
  CHECK(Error(R"({"messages": [{"content": "x"}]})").starts_with("messages[0]:"));
  CHECK(Error(R"({"messages": [{"role": "user", "content": 5}]})")
            .starts_with("messages[0].content:"));
  CHECK(Error(R"({"messages": [{"role": "user", "content": null}]})")
            .starts_with("messages[0].content:"));
  CHECK(
      Error(
          R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})")
          .starts_with("messages[0].content[0]:"));
  CHECK(Error(R"({"messages": [{"role": "user", "content": [{"type": 7, "text": "x"}]}]})")
            .starts_with("messages[0].content[0]:"));
  CHECK(
      Error(
          R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}]})")
          .starts_with("messages[0].tool_calls[0].function:"));
  CHECK(Error(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"type": "x",
                 "function": {"name": "f"}}]}]})")
            .starts_with("messages[0].tool_calls[0].type:"));
  CHECK(Error(R"({"messages": [{"role": "tool", "content": "x", "tool_call_id": 3}]})")
            .starts_with("messages[0].tool_call_id:"));
  CHECK(Error(R"({"messages": [{"role": "user", "content": "x", "reasoning_content": 1}]})")
            .starts_with("messages[0].reasoning_content:"));
  CHECK(Error(R"({"messages": [], "tools": {}})").starts_with("tools:"));
  CHECK(Error(R"({"messages": [], "add_generation_prompt": 1})")
            .starts_with("add_generation_prompt:"));
  CHECK(Error(R"({"messages": [], "chat_template_kwargs": {"enable_thinking": "no"}})")
            .starts_with("chat_template_kwargs.enable_thinking:"));
  CHECK(Error(R"({"messages": [], "chat_template_kwargs": {"bos_token": "x"}})")
            .starts_with("chat_template_kwargs.bos_token:"));
  // Nesting past the engine's bound is refused before anything walks it.
  std::string deep = "1";
  for (int i = 0; i < 200; ++i) deep = "[" + deep + "]";
  CHECK(
      Error(R"({"messages": [], "tools": )" + deep + "}").starts_with("tools: nested deeper than"));
}

}  // namespace
}  // namespace odmoe
