// Chat templates through the Jinja engine: the real templates' renders
// (golden strings from jinja2, scripts/fixtures/make_chat_golden.py) from the
// templates the repository's tiny models carry (and Qwen2.5's from the
// fetched templates, scripts/fetch_chat_templates.sh), the context
// transformers passes (tool calls, tool role, content parts, kwargs), the
// fallback, start-up errors, and the reply splitter.
#include "main_node/chat_template.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/gguf_reader.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

json LoadGolden() {
  const std::string path = test::SourcePath("tests/data/golden/chat_templates.json");
  std::ifstream in(path);
  INFO("missing golden file " << path);
  REQUIRE(in.good());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_object());
  return j;
}

std::vector<ChatMessage> Messages(const json& j) {
  std::vector<ChatMessage> out;
  for (const json& m : j) {
    ChatMessage msg{m.at("role"), m.at("content"), std::nullopt};
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"];
    out.push_back(std::move(msg));
  }
  return out;
}

std::optional<std::string> GgufTemplate(const std::string& relative) {
  auto file = GgufFile::Open(test::SourcePath(relative));
  REQUIRE(file.ok());
  return (*file)->GetString("tokenizer.chat_template");
}

// A fetched template (scripts/fetch_chat_templates.sh), or nullopt.
std::optional<std::string> FetchedTemplate(const std::string& name) {
  const char* dir = std::getenv("ODMOE_TEMPLATES_DIR");
  const char* home = std::getenv("HOME");
  const std::filesystem::path path =
      std::filesystem::path(dir ? std::string(dir)
                                : std::string(home ? home : "") + "/.cache/odmoe/chat-templates") /
      name;
  std::ifstream in(path);
  if (!in.good()) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ChatFormat Compile(const std::string& text, const ChatVocab& vocab = {}) {
  absl::StatusOr<ChatFormat> f = CompileChatFormat(text, vocab);
  INFO(f.status());
  REQUIRE(f.ok());
  return *f;
}

TEST_CASE("chat templates: the real templates render their golden prompts through the engine",
          "[main_node][chat][golden]") {
  const json golden = LoadGolden();
  // Where each golden family's template is: the tiny models carry five.
  const std::map<std::string, std::optional<std::string>> sources = {
      {"qwen3", GgufTemplate("tests/data/arch/tiny-qwen3moe.gguf")},
      {"qwen2", GgufTemplate("tests/data/arch/tiny-qwen2moe.gguf")},
      {"deepseek-v2", GgufTemplate("tests/data/arch/tiny-deepseek2.gguf")},
      {"olmoe", GgufTemplate("tests/data/arch/tiny-olmoe.gguf")},
      {"gpt-oss", GgufTemplate("tests/data/arch/tiny-gpt-oss.gguf")},
      {"qwen2.5", FetchedTemplate("Qwen-Qwen2.5-7B-Instruct.jinja")},
      {"tulu", std::nullopt},  // open-instruct's: in no file here
  };
  int cases = 0;
  for (const json& f : golden.at("families")) {
    const std::string name = f.at("name");
    INFO("template " << name << " (" << f.at("template").get<std::string>() << ")");
    auto it = sources.find(name);
    REQUIRE(it != sources.end());
    if (!it->second) {
      WARN("golden family " << name << ": its template is not available here, skipped");
      continue;
    }
    const ChatFormat format =
        Compile(*it->second, ChatVocab{f.at("bos_text"), f.at("eos_text"), {}});
    for (const json& c : f.at("cases")) {
      INFO("case " << c.at("name").get<std::string>());
      // tiny-olmoe's copy ends a last assistant turn without OLMoE-Instruct's
      // "\n" (jinja2 renders that copy as the engine does: 6 of 7 equal).
      if (name == "olmoe" && c.at("name") == "ends_with_assistant") continue;
      ChatOptions options;
      options.date = golden.at("date");
      const json& o = c.at("options");
      if (o.contains("enable_thinking")) options.enable_thinking = o["enable_thinking"].get<bool>();
      if (o.contains("reasoning_effort")) options.reasoning_effort = o["reasoning_effort"];
      absl::StatusOr<std::string> prompt = RenderChat(format, Messages(c.at("messages")), options);
      INFO(prompt.status());
      REQUIRE(prompt.ok());
      CHECK(*prompt == c.at("expected").get<std::string>());
      ++cases;
    }
  }
  CHECK(cases >= 50);
}

TEST_CASE("chat templates: the reply family is detected for the splitter only",
          "[main_node][chat]") {
  CHECK(Compile("{{ '<|start|>system<|message|>' }}<|channel|>final").family ==
        ChatFamily::kHarmony);
  CHECK(Compile("{% if enable_thinking %}</think>{% endif %}").family == ChatFamily::kThink);
  CHECK(Compile("{{ '<|im_start|>' + messages[0]['role'] }}").family == ChatFamily::kPlain);
  CHECK(std::string(ChatFamilyName(ChatFamily::kThink)) == "think");
  const ChatFormat qwen3 = Compile(*GgufTemplate("tests/data/arch/tiny-qwen3moe.gguf"));
  CHECK(qwen3.family == ChatFamily::kThink);
  CHECK(qwen3.has_template);
}

TEST_CASE("chat templates: a template the engine cannot run is a start-up error naming its line",
          "[main_node][chat]") {
  absl::StatusOr<ChatFormat> f =
      CompileChatFormat(std::string("{% for m in messages %}\n{% include 'x' %}"));
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(f.status().message()) == "chat template line 2: unsupported tag 'include'");
  // An error at render time (raise_exception) is a 400 naming the messages.
  const ChatFormat strict = Compile(
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system "
      "messages') }}{% endif %}{{ m.content }}{% endfor %}");
  absl::StatusOr<std::string> r = RenderChat(strict, {{"system", "x", std::nullopt}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) ==
        "messages: chat template line 1: raise_exception: no system messages");
  CHECK(std::string(RenderChat(strict, {}).status().message()).starts_with("messages:"));
}

TEST_CASE("chat templates: without a template, the documented fallback", "[main_node][chat]") {
  absl::StatusOr<ChatFormat> f = CompileChatFormat(std::nullopt, ChatVocab{"<s>", "</s>", {}});
  REQUIRE(f.ok());
  CHECK_FALSE(f->has_template);
  CHECK(f->family == ChatFamily::kPlain);
  absl::StatusOr<std::string> r =
      RenderChat(*f, {{"system", "Be brief.", std::nullopt}, {"user", "Hi", std::nullopt}});
  REQUIRE(r.ok());
  CHECK(*r == "system: Be brief.\nuser: Hi\nassistant:");
  ChatOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  CHECK(RenderChat(*f, {{"user", "Hi", std::nullopt}}, no_prompt).value() == "user: Hi\n");
  // The fallback knows the OpenAI roles only.
  r = RenderChat(*f, {{"wizard", "x", std::nullopt}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).starts_with("messages[0].role:"));

  // With tools: a first line lists them and asks for the Hermes syntax the
  // reply is parsed in; an assistant turn's calls are written in it.
  ChatOptions with_tools;
  with_tools.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_time", "parameters": {}}}])");
  ChatMessage call{"assistant", "", std::nullopt};
  call.content_null = true;
  call.tool_calls = {{"call_1", "function", "get_time", nlohmann::ordered_json{{"zone", "UTC"}}}};
  ChatMessage result{"tool", "12:00", std::nullopt};
  result.tool_call_id = "call_1";
  r = RenderChat(*f, {{"user", "Time?", std::nullopt}, call, result}, with_tools);
  REQUIRE(r.ok());
  CHECK(*r ==
        "system: You may call these tools. To call one, answer with <tool_call>{\"name\": NAME, "
        "\"arguments\": {...}}</tool_call>.\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {}}}\n"
        "user: Time?\nassistant: <tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": "
        "\"UTC\"}}</tool_call>\ntool: 12:00\nassistant:");
}

TEST_CASE("chat templates: a file's tool_use template renders requests with tools",
          "[main_node][chat]") {
  absl::StatusOr<ChatFormat> f = CompileChatFormat(
      std::string("plain:{{ messages[0].content }}"), ChatVocab{},
      std::string("tools:{{ tools | length }}:{{ messages[0].content }}"));
  REQUIRE(f.ok());
  ChatOptions options;
  CHECK(RenderChat(*f, {{"user", "Hi", std::nullopt}}, options).value() == "plain:Hi");
  options.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  CHECK(RenderChat(*f, {{"user", "Hi", std::nullopt}}, options).value() == "tools:1:Hi");
  // Its errors name it.
  absl::StatusOr<ChatFormat> bad =
      CompileChatFormat(std::string("ok"), ChatVocab{}, std::string("{% include 'x' %}"));
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).starts_with("tool_use template line 1:"));
}

TEST_CASE("chat templates: the context is what transformers passes", "[main_node][chat]") {
  // A template that shows what it was given (content null would print "None":
  // it gets "").
  const ChatFormat f = Compile(
      "{% for m in messages %}[{{ m.role }}|{{ m.content }}|{{ m.reasoning_content }}|"
      "{% for c in m.tool_calls or [] %}{{ c.id }}:{{ c.function.name }}:{{ "
      "c.function.arguments|tojson }}:"
      "{{ c.function.arguments is mapping }}{% endfor %}|{{ m.tool_call_id }}|{{ m.name }}]{% "
      "endfor %}"
      "{{ tools|tojson }}|{{ documents }}|{{ add_generation_prompt }}|{{ bos_token }}{{ eos_token "
      "}}|"
      "{{ enable_thinking }}|{{ reasoning_effort }}|{{ custom }}",
      ChatVocab{"<s>", "</s>", {}});
  std::vector<ChatMessage> messages(3);
  messages[0] = {"user", "Weather?", std::nullopt};
  messages[1].role = "assistant";
  messages[1].content_null = true;
  messages[1].reasoning_content = "need a tool";
  messages[1].tool_calls = {
      {"call_1", "function", "get", ojson::parse(R"({"city": "Paris", "a": 1})")},
      {"call_2", "function", "raw", ojson("not json")}};
  messages[2].role = "tool";
  messages[2].content = "21";
  messages[2].tool_call_id = "call_1";
  messages[2].name = "get";
  ChatOptions o;
  o.tools =
      ojson::parse(R"([{"type": "function", "function": {"name": "get", "parameters": {}}}])");
  o.enable_thinking = false;
  o.reasoning_effort = "high";
  o.template_kwargs["custom"] = "yes";
  absl::StatusOr<std::string> r = RenderChat(f, messages, o);
  REQUIRE(r.ok());
  CHECK(*r ==
        "[user|Weather?||||][assistant||need a tool|call_1:get:{\"city\": \"Paris\", \"a\": "
        "1}:True"
        "call_2:raw:\"not json\":False||][tool|21|||call_1|get]"
        "[{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\": "
        "{}}}]|None|True|<s></s>|"
        "False|high|yes");
}

TEST_CASE("chat templates: content parts reach templates that render lists, joined elsewhere",
          "[main_node][chat]") {
  ChatMessage m{"user", "", std::nullopt};
  m.content_parts =
      ojson::parse(R"([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])");
  const ChatFormat lists = Compile(
      "{% for m in messages %}{% if m.content is string %}S:{{ m.content }}{% else %}"
      "{% for p in m.content %}<{{ p.text }}>{% endfor %}{% endif %}{% endfor %}");
  CHECK(lists.content_parts);
  CHECK(RenderChat(lists, {m}).value() == "<a><b>");
  const ChatFormat strings = Compile("{% for m in messages %}{{ m.content }}{% endfor %}");
  CHECK_FALSE(strings.content_parts);
  CHECK(RenderChat(strings, {m}).value() == "a\nb");
}

TEST_CASE("chat templates: content null reaches templates that cannot take it as an empty string",
          "[main_node][chat]") {
  ChatMessage call{"assistant", "", std::nullopt};
  call.content_null = true;
  call.tool_calls = {{"c1", "function", "get_weather", ojson::parse(R"({"city": "Paris"})")}};
  const std::vector<ChatMessage> messages = {{"user", "Weather?", std::nullopt}, call};
  ChatOptions o;
  o.add_generation_prompt = false;
  // Qwen3's template fails on content null (jinja2 too): it gets "".
  const ChatFormat qwen3 = Compile(*GgufTemplate("tests/data/arch/tiny-qwen3moe.gguf"));
  CHECK(qwen3.null_content_as_empty);
  CHECK(RenderChat(qwen3, messages, o).value() ==
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call><|im_end|>\n");
  // One that tests for none keeps it.
  const ChatFormat careful = Compile(
      "{% for m in messages %}{% if m.content is none %}(none){% else %}{{ m.content }}{% endif "
      "%}{% endfor %}");
  CHECK_FALSE(careful.null_content_as_empty);
  CHECK(RenderChat(careful, messages, o).value() == "Weather?(none)");
}

// ``The header's usage example'' and the splitter cases follow.
ChatFormat Format(ChatFamily family) {
  ChatFormat f;
  f.family = family;
  f.has_template = true;
  return f;
}

// Runs `pieces` through a splitter and returns (reasoning, content).
std::pair<std::string, std::string> Split(
    const ChatFormat& f, const std::vector<std::pair<int32_t, std::string>>& pieces,
    std::string_view prompt = {}) {
  ChatReplySplitter s(f, prompt);
  std::string reasoning, content;
  for (const auto& [id, piece] : pieces) {
    ChatReplyPiece p = s.Push(id, piece);
    reasoning += p.reasoning;
    content += p.content;
  }
  ChatReplyPiece p = s.Flush();
  return {reasoning + p.reasoning, content + p.content};
}

// `text` cut into pieces of `n` bytes (id 100: ordinary text).
std::vector<std::pair<int32_t, std::string>> Pieces(const std::string& text, size_t n) {
  std::vector<std::pair<int32_t, std::string>> out;
  for (size_t i = 0; i < text.size(); i += n) out.push_back({100, text.substr(i, n)});
  return out;
}

TEST_CASE("chat templates: qwen3 replies split into reasoning and content however they stream",
          "[main_node][chat]") {
  const ChatFormat qwen3 = Format(ChatFamily::kThink);
  struct Case {
    std::string reply, reasoning, content;
  };
  const std::vector<Case> cases = {
      {"<think>\nLet me think.\n\nMore.\n</think>\n\nThe answer is 4.", "Let me think.\n\nMore.",
       "The answer is 4."},
      {"<think>\n\n</think>\n\nDirect.", "", "Direct."},
      {"No thinking here, <think> mid-text stays.", "",
       "No thinking here, <think> mid-text stays."},
      {"<think>\nunfinished because of max_tokens\n", "unfinished because of max_tokens", ""},
      {"  <thi", "", "  <thi"},
      {"<think>a</thinking> b </think>c\n", "a</thinking> b ", "c\n"},
  };
  for (const Case& c : cases) {
    for (size_t n = 1; n <= c.reply.size(); ++n) {
      INFO("reply \"" << c.reply << "\" in pieces of " << n);
      const auto [reasoning, content] = Split(qwen3, Pieces(c.reply, n));
      CHECK(reasoning == c.reasoning);
      CHECK(content == c.content);
    }
  }
  // Families without reasoning pass the reply through.
  const std::string reply = "<think>\nx\n</think>\n\ny";
  CHECK(Split(Format(ChatFamily::kPlain), Pieces(reply, 3)) ==
        std::pair<std::string, std::string>{"", reply});
}

TEST_CASE("chat templates: gemma 4's thought channel splits as reasoning", "[main_node][chat]") {
  // A template that writes Gemma 4's markers picks them.
  const ChatFormat gemma =
      Compile("{{ '<|turn>model\\n' }}{% if not enable_thinking %}{{ '<|channel>thought\\n<channel|>' "
              "}}{% endif %}");
  REQUIRE(gemma.family == ChatFamily::kThink);
  CHECK(gemma.think_open == "<|channel>thought");
  CHECK(gemma.think_close == "<channel|>");
  const std::string reply = "<|channel>thought\nWeigh it.\n<channel|>It is 4.";
  for (size_t n = 1; n <= reply.size(); ++n) {
    INFO("pieces of " << n);
    CHECK(Split(gemma, Pieces(reply, n)) ==
          std::pair<std::string, std::string>{"Weigh it.", "It is 4."});
  }
  // Thinking off: the prompt closed an empty channel, the reply is content.
  CHECK(Split(gemma, Pieces("It is 4.", 2), "<|turn>model\n<|channel>thought\n<channel|>") ==
        std::pair<std::string, std::string>{"", "It is 4."});
  CHECK(Compile("{{ '</think>' }}").think_open == "<think>");
}

TEST_CASE("chat templates: harmony replies split by channel, control tokens dropped",
          "[main_node][chat]") {
  ChatFormat harmony = Format(ChatFamily::kHarmony);
  harmony.harmony = HarmonyTokenIds{1, 2, 3, 4, 5, 6};
  enum : int32_t { kStart = 1, kChannel, kMessage, kEnd, kReturn, kCall, kText = 100 };
  // Control tokens decode to "" (they are control tokens in gpt-oss's vocab).
  const std::vector<std::pair<int32_t, std::string>> reply = {
      {kChannel, ""},       {kText, "analysis"},
      {kMessage, ""},       {kText, "User greets. "},
      {kText, "Reply."},    {kEnd, ""},
      {kStart, ""},         {kText, "assistant"},
      {kChannel, ""},       {kText, "commentary"},
      {kMessage, ""},       {kText, "(preamble)"},
      {kEnd, ""},           {kStart, ""},
      {kText, "assistant"}, {kChannel, ""},
      {kText, "final"},     {kMessage, ""},
      {kText, "Hello"},     {kText, "!"},
      {kReturn, ""}};
  CHECK(Split(harmony, reply) ==
        std::pair<std::string, std::string>{"User greets. Reply.(preamble)", "Hello!"});
  // A reply that opens no message (a model that ignores the format) is content.
  CHECK(Split(harmony, Pieces("plain words", 2)) ==
        std::pair<std::string, std::string>{"", "plain words"});
  // Only the final channel, as with reasoning cut short.
  CHECK(Split(harmony, {{kChannel, ""}, {kText, "final"}, {kMessage, ""}, {kText, "ok"}}) ==
        std::pair<std::string, std::string>{"", "ok"});
  // Without the token ids the channels cannot be seen: everything is content.
  CHECK(Split(Format(ChatFamily::kHarmony), Pieces("text", 1)) ==
        std::pair<std::string, std::string>{"", "text"});
}

TEST_CASE("chat templates: a think block the prompt opened starts the reply as reasoning",
          "[main_node][chat]") {
  const ChatFormat think = Format(ChatFamily::kThink);
  const std::string reply = "\nweighing it\n</think>\n\nThe answer.";
  for (size_t n = 1; n <= reply.size(); ++n) {
    INFO("pieces of " << n);
    CHECK(Split(think, Pieces(reply, n), "<|Assistant|><think>\n") ==
          std::pair<std::string, std::string>{"weighing it", "The answer."});
  }
  // A prompt that closed the block (thinking off) leaves the reply as content.
  CHECK(Split(think, Pieces("Direct.", 2), "<think>\n\n</think>\n\n") ==
        std::pair<std::string, std::string>{"", "Direct."});
}

TEST_CASE("chat templates: the header's usage example, on a real tokenizer", "[main_node][chat]") {
  auto file = GgufFile::Open(test::SourcePath("tests/data/arch/tiny-qwen3moe.gguf"));
  REQUIRE(file.ok());
  auto loaded = Tokenizer::FromGguf(**file);
  REQUIRE(loaded.ok());
  const Tokenizer& tok = **loaded;
  auto text = [&tok](int32_t id) { return id < 0 ? std::string() : tok.vocab().tokens[id]; };
  ChatVocab vocab{text(tok.bos_id()), text(tok.eos_id()),
                  [&tok](std::string_view t) { return tok.TokenId(t); }};
  absl::StatusOr<ChatFormat> format =
      CompileChatFormat((*file)->GetString("tokenizer.chat_template"), vocab);
  REQUIRE(format.ok());
  ChatOptions options;
  options.enable_thinking = false;
  const std::vector<ChatMessage> messages = {{"user", "Hi", std::nullopt}};
  absl::StatusOr<std::string> prompt = RenderChat(*format, messages, options);
  REQUIRE(prompt.ok());
  CHECK(*prompt ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  ChatReplySplitter split(*format, *prompt);
  CHECK(split.Push(0, "Hello").content == "Hello");
  CHECK(split.Flush().content.empty());
}

}  // namespace
}  // namespace odmoe
