// Each family's tool-call syntax parsed from replies written as its models
// write them (single call, two calls, text before a call, malformed calls, no
// call), whole and streamed: split at every byte, and byte by byte, the events
// give exactly the whole parse, content never carries a piece of a marker,
// every content event is whole UTF-8, and the OpenAI deltas rebuild the
// message's tool_calls as a client accumulates them.
#include "main_node/tool_call_parser.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "main_node/tool_call_json.h"
#include "tokenizer/utf8.h"
#include "tool_call_test_tools.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;
using Kind = ToolCallEvent::Kind;

struct Expected {
  std::string name;
  std::string arguments;
};

struct Case {
  ToolCallSyntax syntax;
  std::string what;
  std::string text;
  std::string content;  // the text outside calls
  std::vector<Expected> calls;
};

// What the whole reply is when nothing in it is a (valid) call.
Case Plain(ToolCallSyntax syntax, std::string what, std::string text) {
  std::string content = text;
  return {syntax, std::move(what), std::move(text), std::move(content), {}};
}

std::vector<Case> Cases() {
  using S = ToolCallSyntax;
  const std::string w = R"({"city": "Paris", "days": 3})";
  const std::string q = R"({"query": "moe inference"})";
  return {
      // Hermes / Qwen2.5 / Qwen3.
      {S::kHermes,
       "single",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + w + "}\n</tool_call>",
       "",
       {{"get_weather", w}}},
      {S::kHermes,
       "two calls",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + w +
           "}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": " + q +
           "}\n</tool_call>\n",
       "",
       {{"get_weather", w}, {"search", q}}},
      {S::kHermes,
       "text before",
       "Météo à Paris ☀ — let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": " +
           w + "}\n</tool_call>",
       "Météo à Paris ☀ — let me check.\n\n",
       {{"get_weather", w}}},
      {S::kHermes,
       "arguments before name",
       "<tool_call>{\"arguments\": " + q + ", \"name\": \"search\"}</tool_call>",
       "",
       {{"search", q}}},
      {S::kHermes,
       "arguments as a string",
       "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": "
       "\\\"x\\\"}\"}</tool_call>",
       "",
       {{"search", R"({"query": "x"})"}}},
      {S::kHermes,
       "no arguments",
       "<tool_call>{\"name\": \"search\"}</tool_call>",
       "",
       {{"search", "{}"}}},
      {S::kHermes,
       "then text",
       "<tool_call>{\"name\": \"search\", \"arguments\": " + q + "}</tool_call> Done.",
       " Done.",
       {{"search", q}}},
      Plain(S::kHermes, "bad JSON",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Paris\"\n</tool_call>"),
      Plain(S::kHermes, "unknown tool",
            "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"),
      Plain(S::kHermes, "truncated",
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"),
      Plain(S::kHermes, "no call", "It is sunny in Paris. <b>Use</b> a <tool> if you like < 3."),
      // Qwen3-Coder.
      {S::kQwen3Coder,
       "single",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</"
       "parameter>\n<parameter=days>\n3\n"
       "</parameter>\n</function>\n</tool_call>",
       "",
       {{"get_weather", w}}},
      {S::kQwen3Coder,
       "two calls, typed values",
       "I'll search "
       "twice.\n<tool_call>\n<function=search>\n<parameter=query>\nmoe\ninference\n</parameter>\n"
       "<parameter=filters>\n{\"site\": "
       "\"example.org\"}\n</parameter>\n<parameter=exact>\ntrue\n</parameter>\n"
       "</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</"
       "parameter>\n"
       "<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",
       "I'll search twice.\n",
       {{"search",
         R"({"query": "moe\ninference", "filters": {"site":"example.org"}, "exact": true})"},
        {"get_weather", R"({"city": "42", "days": "three"})"}}},
      {S::kQwen3Coder,
       "text values with quotes, UTF-8 and newlines",
       "<tool_call>\n<function=search>\n<parameter=query>\n\n  Grüße \"x\" \\ ☀\n\n</parameter>\n"
       "<parameter=undeclared>\n</parameter>\n</function>\n</tool_call>",
       "",
       {{"search", R"({"query": "\n  Grüße \"x\" \\ ☀\n", "undeclared": ""})"}}},
      {S::kQwen3Coder,
       "no parameters",
       "<tool_call>\n<function=search>\n</function>\n</tool_call>",
       "",
       {{"search", "{}"}}},
      Plain(S::kQwen3Coder, "no </function>",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</"
            "tool_call>"),
      Plain(S::kQwen3Coder, "unknown tool",
            "<tool_call>\n<function=get_time>\n</function>\n</tool_call>"),
      Plain(S::kQwen3Coder, "no call", "Use <function=x> in your code."),
      // Mistral, JSON array.
      {S::kMistral,
       "single",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + w + ", \"id\": \"a1b2c3d4e\"}]",
       "",
       {{"get_weather", w}}},
      {S::kMistral,
       "two calls, text before",
       "Sure. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": " + w +
           "}, {\"name\": \"search\", \"arguments\": " + q + "}]",
       "Sure. ",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kMistral, "bad JSON",
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": }}]"),
      Plain(S::kMistral, "not a call", "[TOOL_CALLS] nothing"),
      Plain(S::kMistral, "no call", "Arrays like [1, 2] stay text."),
      // Mistral, [ARGS] form.
      {S::kMistralArgs, "single", "[TOOL_CALLS]get_weather[ARGS]" + w, "", {{"get_weather", w}}},
      {S::kMistralArgs,
       "two calls with call ids",
       "Checking.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]" + w + "[TOOL_CALLS]search[ARGS]" +
           q,
       "Checking.",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kMistralArgs, "bad JSON", "[TOOL_CALLS]get_weather[ARGS]{\"city\" \"Paris\"}"),
      Plain(S::kMistralArgs, "unknown tool", "[TOOL_CALLS]get_time[ARGS]{}"),
      // Llama 3.x JSON.
      {S::kLlama3,
       "single",
       "{\"name\": \"get_weather\", \"parameters\": " + w + "}",
       "",
       {{"get_weather", w}}},
      {S::kLlama3,
       "python tag",
       "<|python_tag|>{\"type\": \"function\", \"name\": \"search\", \"parameters\": " + q + "}",
       "",
       {{"search", q}}},
      {S::kLlama3,
       "two calls",
       "{\"name\": \"get_weather\", \"parameters\": " + w +
           "}; {\"name\": \"search\", \"parameters\": " + q + "}",
       "",
       {{"get_weather", w}, {"search", q}}},
      {S::kLlama3,
       "text before",
       "I'll look it up: {\"name\": \"search\", \"parameters\": " + q + "}",
       "I'll look it up: ",
       {{"search", q}}},
      Plain(S::kLlama3, "JSON that is not a call",
            "Schema: {\"type\": \"object\", \"x\": [1, 2.5e3]} ok"),
      Plain(S::kLlama3, "builtin tool", "<|python_tag|>brave_search.call(query=\"odmoe\")"),
      Plain(S::kLlama3, "bad JSON", "{\"name\": \"search\", \"parameters\": {\"query\": tru}}"),
      // gpt-oss harmony.
      {S::kHarmony,
       "single",
       "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + w +
           "<|call|>",
       "",
       {{"get_weather", w}}},
      {S::kHarmony,
       "after analysis",
       "<|channel|>analysis<|message|>Need the "
       "weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>" +
           w + "<|call|>",
       "<|channel|>analysis<|message|>Need the weather.<|end|>",
       {{"get_weather", w}}},
      {S::kHarmony,
       "recipient in the role",
       "<|start|>assistant to=functions.search<|channel|>commentary json<|message|>" + q +
           "<|call|>",
       "",
       {{"search", q}}},
      {S::kHarmony,
       "two calls",
       "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + w +
           "<|call|><|start|>assistant<|channel|>commentary to=functions.search "
           "<|constrain|>json<|message|>" +
           q + "<|call|>",
       "",
       {{"get_weather", w}, {"search", q}}},
      Plain(
          S::kHarmony, "bad JSON",
          "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{query}<|call|>"),
      Plain(S::kHarmony, "no call", "<|channel|>final<|message|>It is sunny.<|return|>"),
      // DeepSeek-V3 (and R1).
      {S::kDeepSeekV3,
       "single",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" +
           w + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "",
       {{"get_weather", w}}},
      {S::kDeepSeekV3,
       "two calls, text before",
       "Let me "
       "check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```"
       "json\n" +
           w +
           "\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```"
           "json\n" +
           q + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Let me check.",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kDeepSeekV3, "unknown tool",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}"
            "\n```"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
      // DeepSeek-V3.1.
      {S::kDeepSeekV31,
       "single",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + w +
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "",
       {{"get_weather", w}}},
      {S::kDeepSeekV31,
       "two calls",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + w +
           "<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>" + q +
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kDeepSeekV31, "bad JSON",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"query\": "
            "}<｜tool▁call▁end｜>"
            "<｜tool▁calls▁end｜>"),
      // GLM-4.5.
      {S::kGlm45,
       "single",
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</"
       "arg_value>\n<arg_key>days</arg_key>\n"
       "<arg_value>3</arg_value>\n</tool_call>",
       "",
       {{"get_weather", w}}},
      {S::kGlm45,
       "two calls, text before",
       "I'll check both.\n<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>moe "
       "inference</arg_value>\n"
       "</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</"
       "arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
       "I'll check both.\n",
       {{"search", q}, {"get_weather", w}}},
      Plain(S::kGlm45, "no </arg_value>",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris\n</tool_call>"),
      Plain(S::kGlm45, "unknown tool", "<tool_call>get_time\n</tool_call>"),
      // Kimi-K2.
      {S::kKimiK2,
       "single",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_"
       "begin|>" +
           w + "<|tool_call_end|><|tool_calls_section_end|>",
       "",
       {{"get_weather", w}}},
      {S::kKimiK2,
       "two calls, text before",
       "Checking.<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.get_weather:0"
       "<|tool_call_argument_begin|>" +
           w +
           "<|tool_call_end|>\n<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>" +
           q + "<|tool_call_end|>\n<|tool_calls_section_end|>",
       "Checking.",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kKimiK2, "bad JSON",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0<|tool_call_argument_"
            "begin|>"
            "{\"query\": \"x\"<|tool_call_end|><|tool_calls_section_end|>"),
      // MiniMax-M2.
      {S::kMiniMaxM2,
       "single",
       "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
       "name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n"
       "</minimax:tool_call>",
       "",
       {{"get_weather", w}}},
      {S::kMiniMaxM2,
       "two calls, thinking and text before",
       "<think>\nweather first\n</think>\n\nChecking.\n<minimax:tool_call>\n<invoke "
       "name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n<parameter "
       "name=\"days\">3</parameter>\n</invoke>\n<invoke name=\"search\">\n<parameter "
       "name=\"query\">moe inference</parameter>\n</invoke>\n</minimax:tool_call>",
       "<think>\nweather first\n</think>\n\nChecking.\n",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kMiniMaxM2, "no </parameter>",
            "<minimax:tool_call>\n<invoke name=\"search\">\n<parameter name=\"query\">x\n"
            "</invoke>\n</minimax:tool_call>"),
      // Gemma 4: its own object notation (gemma_call_args.h).
      {S::kGemma4,
       "single",
       "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>",
       "",
       {{"get_weather", w}}},
      {S::kGemma4,
       "two calls, text before",
       "Let me look.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>"
       "<|tool_call>call:search{query:<|\"|>moe inference<|\"|>}<tool_call|>",
       "Let me look.",
       {{"get_weather", w}, {"search", q}}},
      Plain(S::kGemma4, "no closing mark",
            "<|tool_call>call:search{query:<|\"|>x}<tool_call|>"),
      Plain(S::kGemma4, "unknown tool", "<|tool_call>call:get_time{}<tool_call|>"),
      Plain(S::kMiniMaxM2, "unknown tool",
            "<minimax:tool_call>\n<invoke name=\"get_time\">\n</invoke>\n</minimax:tool_call>"),
  };
}

// Everything the events of a streamed reply say, and checks on their order.
ParsedReply Stream(const Case& c, const std::vector<std::string_view>& pieces, bool check_utf8) {
  ToolCallStreamParser parser(c.syntax, TestTools(), /*id_seed=*/7);
  std::vector<ToolCallEvent> events;
  for (std::string_view piece : pieces) parser.Feed(piece, &events);
  parser.Finish(&events);
  ParsedReply reply;
  int open = -1;
  int last = -1;
  for (const ToolCallEvent& e : events) {
    if (e.kind == Kind::kContent) {
      CHECK(open == -1);
      if (check_utf8) CHECK_FALSE(FindInvalidUtf8(e.text).has_value());
    } else if (e.kind == Kind::kCallBegin) {
      CHECK(open == -1);
      CHECK(e.index == last + 1);
      open = last = e.index;
    } else {
      CHECK(e.index == open);
      if (e.kind != Kind::kCallArguments) open = -1;
    }
    ApplyToolCallEvent(e, &reply);
  }
  CHECK(open == -1);
  return reply;
}

void CheckSame(const ParsedReply& got, const ParsedReply& want) {
  CHECK(got.content == want.content);
  REQUIRE(got.tool_calls.size() == want.tool_calls.size());
  for (size_t i = 0; i < want.tool_calls.size(); ++i) {
    CHECK(got.tool_calls[i].id == want.tool_calls[i].id);
    CHECK(got.tool_calls[i].name == want.tool_calls[i].name);
    CHECK(got.tool_calls[i].arguments == want.tool_calls[i].arguments);
  }
}

TEST_CASE("tool calls: each family's replies parse whole", "[tool_calls]") {
  for (const Case& c : Cases()) {
    INFO(ToolCallSyntaxName(c.syntax) << ": " << c.what);
    const ParsedReply r = ParseToolCalls(c.syntax, c.text, TestTools(), /*id_seed=*/7);
    CHECK(r.content == c.content);
    REQUIRE(r.tool_calls.size() == c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      CHECK(r.tool_calls[i].name == c.calls[i].name);
      CHECK(r.tool_calls[i].arguments == c.calls[i].arguments);
      CHECK(json::parse(r.tool_calls[i].arguments, nullptr, false).is_object());
    }
  }
}

TEST_CASE("tool calls: every family has a single, a multiple and a malformed case",
          "[tool_calls]") {
  for (const ToolCallSyntaxSpec& spec : ToolCallSyntaxSpecs()) {
    size_t single = 0, several = 0, malformed = 0;
    for (const Case& c : Cases()) {
      if (c.syntax != spec.syntax) continue;
      single += c.calls.size() == 1;
      several += c.calls.size() > 1;
      malformed += c.calls.empty();
    }
    INFO(spec.name);
    CHECK(single > 0);
    CHECK(several > 0);
    CHECK(malformed > 0);
  }
}

TEST_CASE("tool calls: a reply split at any byte streams to its whole parse", "[tool_calls]") {
  for (const Case& c : Cases()) {
    INFO(ToolCallSyntaxName(c.syntax) << ": " << c.what);
    const ParsedReply whole = ParseToolCalls(c.syntax, c.text, TestTools(), 7);
    const std::string_view text = c.text;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      INFO("cut at " << cut);
      CheckSame(Stream(c, {text.substr(0, cut), text.substr(cut)}, /*check_utf8=*/false), whole);
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    CheckSame(Stream(c, bytes, /*check_utf8=*/true), whole);
  }
}

TEST_CASE("tool calls: mutated replies stream to their whole parse, arguments always objects",
          "[tool_calls]") {
  std::mt19937 rng(34);
  const std::string interesting = "<>{}[]\"\\:,;\n |=_.`\xe2\xff";
  for (const Case& c : Cases()) {
    INFO(ToolCallSyntaxName(c.syntax) << ": " << c.what);
    for (int round = 0; round < 40; ++round) {
      std::string text = c.text;
      for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0 && !text.empty(); --edits) {
        const size_t at = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text.erase(at, 1 + rng() % 4);
            break;
          case 1:
            text.insert(at, 1, interesting[rng() % interesting.size()]);
            break;
          default:
            text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 16));
            break;
        }
      }
      INFO(text);
      const ParsedReply whole = ParseToolCalls(c.syntax, text, TestTools(), 7);
      for (const ToolCall& call : whole.tool_calls) {
        if (!FindInvalidUtf8(call.arguments).has_value()) {
          CHECK(json::parse(call.arguments, nullptr, false).is_object());
        }
      }
      std::vector<std::string_view> pieces;
      for (size_t i = 0; i < text.size();) {
        const size_t n = 1 + rng() % 8;
        pieces.push_back(std::string_view(text).substr(i, n));
        i += n;
      }
      Case mutated = c;
      mutated.text = text;
      CheckSame(Stream(mutated, pieces, /*check_utf8=*/false), whole);
    }
  }
}

TEST_CASE("tool calls: streamed deltas rebuild message.tool_calls as a client accumulates them",
          "[tool_calls]") {
  for (const Case& c : Cases()) {
    INFO(ToolCallSyntaxName(c.syntax) << ": " << c.what);
    const ParsedReply whole = ParseToolCalls(c.syntax, c.text, TestTools(), 7);
    ToolCallStreamParser parser(c.syntax, TestTools(), 7);
    std::vector<ToolCallEvent> events;
    for (size_t i = 0; i < c.text.size(); i += 3)
      parser.Feed(std::string_view(c.text).substr(i, 3), &events);
    parser.Finish(&events);
    json calls = json::array();  // what the OpenAI SDK's stream helper keeps
    std::string content;
    for (const ToolCallEvent& e : events) {
      if (e.kind == Kind::kContent || e.kind == Kind::kCallAbort) content += e.text;
      auto delta = ToolCallDeltaJson(e);
      if (!delta) continue;
      REQUIRE(delta->size() == 1);
      const json& d = (*delta)[0];
      const size_t index = d.at("index").get<size_t>();
      if (index == calls.size()) {
        CHECK(d.at("type") == "function");
        CHECK(d.at("function").at("arguments") == "");
        calls.push_back({{"id", d.at("id")},
                         {"type", "function"},
                         {"function", {{"name", d.at("function").at("name")}, {"arguments", ""}}}});
      } else {
        REQUIRE(index + 1 == calls.size());
        CHECK_FALSE(d.contains("id"));
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() +
            d.at("function").at("arguments").get<std::string>();
      }
    }
    if (whole.tool_calls.size() == calls.size()) {
      CHECK(calls == ToolCallsJson(whole.tool_calls));
      CHECK(content == whole.content);
    } else {
      // A call aborted after it began: the stream showed it; the whole
      // parse keeps its text as content, which the stream also sent.
      CHECK(whole.tool_calls.empty());
      CHECK(content == c.text);
    }
  }
}

TEST_CASE("tool calls: ids are deterministic per seed and shaped per family", "[tool_calls]") {
  const std::string a = ToolCallId(ToolCallIdStyle::kOpenAi, 1, 0, "f");
  CHECK(a.size() == 29);
  CHECK(a.rfind("call_", 0) == 0);
  CHECK(a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 5) ==
        std::string::npos);
  CHECK(a == ToolCallId(ToolCallIdStyle::kOpenAi, 1, 0, "f"));
  CHECK(a != ToolCallId(ToolCallIdStyle::kOpenAi, 1, 1, "f"));
  CHECK(a != ToolCallId(ToolCallIdStyle::kOpenAi, 2, 0, "f"));
  const std::string m = ToolCallId(ToolCallIdStyle::kMistral, 1, 0, "f");
  CHECK(m.size() == 9);
  CHECK(m.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") ==
        std::string::npos);
  CHECK(ToolCallId(ToolCallIdStyle::kKimi, 1, 2, "search") == "functions.search:2");
  const ParsedReply r =
      ParseToolCalls(ToolCallSyntax::kMistralArgs, "[TOOL_CALLS]search[ARGS]{}", TestTools(), 5);
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].id == ToolCallId(ToolCallIdStyle::kMistral, 5, 0, "search"));
}

TEST_CASE("tool calls: JSON arguments stream before the call ends", "[tool_calls]") {
  ToolCallStreamParser parser(ToolCallSyntax::kHermes, TestTools(), 1);
  std::vector<ToolCallEvent> events;
  parser.Feed("Hi <tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"mo", &events);
  REQUIRE(events.size() == 3);
  CHECK(events[0].kind == Kind::kContent);
  CHECK(events[0].text == "Hi ");
  CHECK(events[1].kind == Kind::kCallBegin);
  CHECK(events[1].name == "search");
  CHECK(events[2].kind == Kind::kCallArguments);
  CHECK(events[2].text == "{\"query\": \"mo");
  events.clear();
  parser.Feed("e\"}}\n</tool", &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].text == "e\"}");
  events.clear();
  CHECK(parser.calls_completed() == 0);
  parser.Feed("_call>", &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kCallEnd);
  CHECK(parser.calls_begun() == 1);
  CHECK(parser.calls_completed() == 1);
}

TEST_CASE("tool calls: tagged text values stream before their end tag", "[tool_calls]") {
  ToolCallStreamParser parser(ToolCallSyntax::kQwen3Coder, TestTools(), 1);
  std::vector<ToolCallEvent> events;
  parser.Feed("<tool_call>\n<function=search>\n<parameter=query>\nThe quick brown fox jumps",
              &events);
  std::string args;
  for (const ToolCallEvent& e : events) {
    if (e.kind == Kind::kCallArguments) args += e.text;
  }
  // Held back: what may be "</parameter>" and the newline before it.
  CHECK(args == "{\"query\": \"The quick bro");
  parser.Feed("\n</parameter>\n<parameter=exact>\ntrue\n</parameter>\n</function>\n</tool_call>",
              &events);
  parser.Finish(&events);
  args.clear();
  for (const ToolCallEvent& e : events) {
    if (e.kind == Kind::kCallArguments) args += e.text;
  }
  CHECK(args == R"({"query": "The quick brown fox jumps", "exact": true})");
}

TEST_CASE("tool calls: content holds back only what may begin a marker", "[tool_calls]") {
  ToolCallStreamParser parser(ToolCallSyntax::kHermes, TestTools(), 1);
  std::vector<ToolCallEvent> events;
  parser.Feed("a < b <tool_c", &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].text == "a < b ");
  events.clear();
  parser.Feed("hair>", &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].text == "<tool_chair>");
}

TEST_CASE("tool calls: a call longer than the bound is content, not memory", "[tool_calls]") {
  std::string text = "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"";
  text += std::string(kMaxToolCallBytes + 10, 'x');
  text += "\"}}</tool_call>";
  const ParsedReply r = ParseToolCalls(ToolCallSyntax::kHermes, text, TestTools(), 1);
  CHECK(r.tool_calls.empty());
  CHECK(r.content == text);
}

TEST_CASE("tool calls: finish_reason is tool_calls only when the model stopped with calls",
          "[tool_calls]") {
  ParsedReply r;
  CHECK(ToolCallFinishReason(r, "stop") == "stop");
  r.tool_calls.push_back({"call_x", "search", "{}"});
  CHECK(ToolCallFinishReason(r, "stop") == "tool_calls");
  CHECK(ToolCallFinishReason(r, "length") == "length");
  CHECK(
      ToolCallsJson(r.tool_calls) ==
      json::parse(
          R"([{"id": "call_x", "type": "function", "function": {"name": "search", "arguments": "{}"}}])"));
}

}  // namespace
}  // namespace odmoe::test
