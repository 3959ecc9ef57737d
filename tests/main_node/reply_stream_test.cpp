// The reply pipeline (main_node/reply_stream.h): reasoning, tool calls and
// stop sequences in one order, and a stream's events adding up to the whole
// reply wherever the tokens were cut.
#include "main_node/reply_stream.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "main_node/tool_call_test_tools.h"

namespace odmoe {
namespace {

struct Whole {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};

// Feeds `pieces` (each a token of its own, id 7 unless a control token is
// given as {id, ""}) and rebuilds the reply from the events alone.
Whole Run(ReplyStream& reply, const std::vector<std::pair<int32_t, std::string>>& pieces) {
  std::vector<ReplyEvent> events;
  for (const auto& [id, text] : pieces) reply.Push(id, text, &events);
  reply.Finish(&events);
  Whole w;
  for (const ReplyEvent& e : events) {
    switch (e.kind) {
      case ReplyEvent::Kind::kReasoning:
        w.reasoning += e.text;
        break;
      case ReplyEvent::Kind::kContent:
        w.content += e.text;
        break;
      case ReplyEvent::Kind::kToolCallBegin:
        REQUIRE(e.index == static_cast<int>(w.calls.size()));
        w.calls.push_back({e.id, e.name, ""});
        break;
      case ReplyEvent::Kind::kToolCallArguments:
        REQUIRE(e.index + 1 == static_cast<int>(w.calls.size()));
        w.calls.back().arguments += e.text;
        break;
    }
  }
  return w;
}

std::vector<std::pair<int32_t, std::string>> Bytes(std::string_view text) {
  std::vector<std::pair<int32_t, std::string>> out;
  for (char c : text) out.emplace_back(7, std::string(1, c));
  return out;
}

TEST_CASE("reply stream: stop sequences cut the content, with or without tools", "[reply]") {
  ReplyStream::Options o;
  o.stop = {"END"};
  ReplyStream reply(o);
  const Whole w = Run(reply, Bytes("Hello, world. END and more"));
  CHECK(w.content == "Hello, world. ");
  CHECK(reply.content() == w.content);
  CHECK(reply.stopped());
  CHECK(reply.FinishReason("stop") == "stop");
}

TEST_CASE("reply stream: a hermes tool call leaves the content, streamed byte by byte",
          "[reply][tool_calls]") {
  const ToolRequest tools{test::TestTools(), {ToolChoiceKind::kAuto, ""}, true};
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  ReplyStream::Options o;
  o.tools = &tools;
  o.syntax = ToolCallSyntax::kHermes;
  o.id_seed = 42;
  ReplyStream reply(o);
  const Whole w = Run(reply, Bytes(text));
  REQUIRE(w.calls.size() == 1);
  CHECK(w.calls[0].name == "get_weather");
  CHECK(w.calls[0].arguments == "{\"city\": \"Paris\"}");
  CHECK(w.content == "Let me look.\n");
  // The whole reply the non-streamed response uses is the events' sum.
  CHECK(reply.content() == w.content);
  REQUIRE(reply.tool_calls().size() == 1);
  CHECK(reply.tool_calls()[0].arguments == w.calls[0].arguments);
  CHECK(reply.tool_calls()[0].id == w.calls[0].id);
  CHECK(reply.FinishReason("stop") == "tool_calls");
  CHECK(reply.FinishReason("length") == "length");

  // tool_choice none: the same text is content.
  const ToolRequest none{test::TestTools(), {ToolChoiceKind::kNone, ""}, true};
  o.tools = &none;
  ReplyStream plain(o);
  const Whole p = Run(plain, Bytes(text));
  CHECK(p.calls.empty());
  CHECK(p.content == text);
  CHECK(plain.FinishReason("stop") == "stop");
}

TEST_CASE("reply stream: a marker that is a control token reaches the parser",
          "[reply][tool_calls]") {
  const ToolRequest tools{test::TestTools(), {ToolChoiceKind::kAuto, ""}, true};
  ReplyStream::Options o;
  o.tools = &tools;
  o.syntax = ToolCallSyntax::kKimiK2;
  // Ids 100..104 are control tokens (their decoded piece is empty); 105 is
  // a control token that is no marker and stays out of the reply.
  const std::vector<std::string> specials = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                                             "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                                             "<|tool_calls_section_end|>",   "<|im_middle|>"};
  o.special_text = [&](int32_t id) {
    return id >= 100 && id < 106 ? specials[id - 100] : std::string();
  };
  ReplyStream reply(o);
  std::vector<std::pair<int32_t, std::string>> pieces = Bytes("Sure.");
  pieces.emplace_back(105, "");
  pieces.emplace_back(100, "");
  pieces.emplace_back(101, "");
  for (auto& p : Bytes("functions.search:0")) pieces.push_back(p);
  pieces.emplace_back(102, "");
  for (auto& p : Bytes("{\"query\": \"odmoe\"}")) pieces.push_back(p);
  pieces.emplace_back(103, "");
  pieces.emplace_back(104, "");
  const Whole w = Run(reply, pieces);
  CHECK(w.content == "Sure.");
  REQUIRE(w.calls.size() == 1);
  CHECK(w.calls[0].name == "search");
  CHECK(w.calls[0].arguments == "{\"query\": \"odmoe\"}");

  // Without the control tokens' text the call is invisible: plain content.
  o.special_text = {};
  ReplyStream blind(o);
  const Whole b = Run(blind, pieces);
  CHECK(b.calls.empty());
}

TEST_CASE("reply stream: a malformed call comes back as content in both shapes",
          "[reply][tool_calls]") {
  const ToolRequest tools{test::TestTools(), {ToolChoiceKind::kAuto, ""}, true};
  const std::string text = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": oops}";
  ReplyStream::Options o;
  o.tools = &tools;
  ReplyStream reply(o);
  const Whole w = Run(reply, Bytes(text));
  CHECK(reply.tool_calls().empty());
  CHECK(reply.content() == text);
  CHECK(reply.FinishReason("stop") == "stop");
  CHECK(w.content == text);
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("reply stream: gpt-oss's tool call in its commentary channel reaches the parser",
          "[reply][tool_calls]") {
  // Harmony's headers are control tokens the splitter reads (ids 200..205
  // here, their pieces empty); a message with a recipient is a call.
  ChatFormat format;
  format.family = ChatFamily::kHarmony;
  format.harmony = {200, 201, 202, 203, 204, 205};  // start channel message end return call
  const ToolRequest tools{test::TestTools(), {ToolChoiceKind::kAuto, ""}, true};
  ReplyStream::Options o;
  o.format = &format;
  o.tools = &tools;
  o.syntax = ToolCallSyntax::kHarmony;
  ReplyStream reply(o);
  std::vector<std::pair<int32_t, std::string>> pieces = {{201, ""}};  // <|channel|>
  for (auto& p : Bytes("analysis")) pieces.push_back(p);
  pieces.emplace_back(202, "");  // <|message|>
  for (auto& p : Bytes("Need the weather.")) pieces.push_back(p);
  pieces.emplace_back(203, "");  // <|end|>
  pieces.emplace_back(200, "");  // <|start|>
  for (auto& p : Bytes("assistant")) pieces.push_back(p);
  pieces.emplace_back(201, "");
  for (auto& p : Bytes("commentary to=functions.get_weather ")) pieces.push_back(p);
  pieces.emplace_back(206, "");  // <|constrain|>: another control token
  for (auto& p : Bytes("json")) pieces.push_back(p);
  pieces.emplace_back(202, "");
  for (auto& p : Bytes("{\"city\": \"Oslo\"}")) pieces.push_back(p);
  pieces.emplace_back(205, "");  // <|call|>
  const Whole w = Run(reply, pieces);
  CHECK(w.reasoning == "Need the weather.");
  CHECK(w.content.empty());
  REQUIRE(w.calls.size() == 1);
  CHECK(w.calls[0].name == "get_weather");
  CHECK(w.calls[0].arguments == "{\"city\": \"Oslo\"}");
  CHECK(reply.FinishReason("stop") == "tool_calls");

  // A final answer with tools offered: its text only, no header text.
  ReplyStream answer(o);
  std::vector<std::pair<int32_t, std::string>> final_pieces = {{201, ""}};
  for (auto& p : Bytes("final")) final_pieces.push_back(p);
  final_pieces.emplace_back(202, "");
  for (auto& p : Bytes("Sunny.")) final_pieces.push_back(p);
  final_pieces.emplace_back(204, "");
  const Whole a = Run(answer, final_pieces);
  CHECK(a.content == "Sunny.");
  CHECK(a.calls.empty());
}

}  // namespace
}  // namespace odmoe
