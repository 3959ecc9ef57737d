// Chat templates: RenderChat against the real templates' output (golden
// strings rendered with jinja2 by scripts/fixtures/make_chat_golden.py),
// family detection, the 400s, and the reply splitter.
#include "main_node/chat_template.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

using json = nlohmann::json;

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

std::string Join(const json& markers) {
  std::string out;
  for (const json& m : markers) out += m.get<std::string>() + "\n{# #}\n";
  return out;
}

TEST_CASE("chat templates: RenderChat equals the real templates byte for byte",
          "[main_node][chat][golden]") {
  const json golden = LoadGolden();
  const json& families = golden.at("families");
  // Every family the issue names is in the file: the test cannot pass empty.
  std::map<std::string, int> seen;
  for (const json& f : families) seen[f.at("family")] += 1;
  CHECK(seen["qwen3"] == 1);
  CHECK(seen["chatml"] == 2);  // Qwen2(-MoE) and Qwen2.5
  CHECK(seen["deepseek"] == 1);
  CHECK(seen["tulu"] == 2);  // OLMoE-Instruct's and open-instruct's
  CHECK(seen["harmony"] == 1);
  int cases = 0;
  for (const json& f : families) {
    const std::string name = f.at("name");
    INFO("template " << name << " (" << f.at("template").get<std::string>() << ")");
    // The markers the script found in the real template select the family.
    const ChatFormat format =
        DetectChatFormat(Join(f.at("markers")), ChatVocab{f.at("bos_text"), f.at("eos_text"), {}});
    REQUIRE(std::string(ChatFamilyName(format.family)) == f.at("family").get<std::string>());
    for (const json& c : f.at("cases")) {
      INFO("case " << c.at("name").get<std::string>());
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

TEST_CASE("chat templates: detection by markers", "[main_node][chat]") {
  auto family = [](const std::string& t) {
    return std::string(ChatFamilyName(DetectChatFormat(t).family));
  };
  CHECK(family("{{ '<|start|>system<|message|>' }}<|channel|>final") == "harmony");
  CHECK(family("<|im_start|>{% if enable_thinking %}</think>") == "qwen3");
  CHECK(family("{{'<|im_start|>' + message['role']}}") == "chatml");
  CHECK(family("{{ 'Assistant: ' + message['content'] + eos_token }}") == "deepseek");
  CHECK(family("{{ '<|user|>\n' }}{{ '<|assistant|>\n' + eos_token }}") == "tulu");
  // Phi-3 writes <|user|> and <|assistant|> too, closed by <|end|>: not tulu.
  CHECK(family("<|user|>{{ eos_token }}<|assistant|><|end|>") == "default");
  CHECK(family("{{ '[INST] ' + message['content'] + ' [/INST]' }}") == "mistral");
  CHECK(family("{{ '<start_of_turn>user' }}") == "default");

  const ChatFormat unknown = DetectChatFormat(std::string("{{ '<start_of_turn>' }}"));
  CHECK(unknown.has_template);
  CHECK(unknown.family == ChatFamily::kDefault);
  const ChatFormat none = DetectChatFormat(std::nullopt);
  CHECK_FALSE(none.has_template);

  // The ChatML default system prompt, with a real or an escaped newline; none
  // when the system text is an expression.
  CHECK(DetectChatFormat(std::string("'<|im_start|>system\\nBe kind.<|im_end|>\\n'"))
            .default_system == "Be kind.");
  CHECK(DetectChatFormat(std::string("'<|im_start|>system\nA\\nB<|im_end|>'")).default_system ==
        "A\nB");
  CHECK(DetectChatFormat(
            std::string("'<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n'"))
            .default_system.empty());

  // BOS only where the template writes bos_token.
  ChatVocab vocab{"<B>", "<E>", {}};
  CHECK(DetectChatFormat(std::string("{{ bos_token }}'Assistant: ' + message['content'] + "
                                     "eos_token"),
                         vocab)
            .writes_bos);
  CHECK_FALSE(DetectChatFormat(std::string("'Assistant: ' + message['content'] + eos_token"), vocab)
                  .writes_bos);
}

ChatFormat Format(ChatFamily family) {
  ChatFormat f;
  f.family = family;
  f.has_template = true;
  return f;
}

std::string RenderError(const ChatFormat& f, const std::vector<ChatMessage>& m,
                        const ChatOptions& o = {}) {
  absl::StatusOr<std::string> r = RenderChat(f, m, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST_CASE("chat templates: what a family cannot express is INVALID_ARGUMENT", "[main_node][chat]") {
  const ChatFormat chatml = Format(ChatFamily::kChatML);
  const ChatFormat qwen3 = Format(ChatFamily::kQwen3);
  const ChatFormat harmony = Format(ChatFamily::kHarmony);
  const ChatFormat mistral = Format(ChatFamily::kMistral);
  const ChatMessage user{"user", "hi", std::nullopt};
  CHECK(RenderError(chatml, {}).starts_with("messages:"));
  CHECK(RenderError(chatml, {{"wizard", "x", std::nullopt}}).starts_with("messages[0].role:"));
  CHECK(RenderError(chatml, {{"developer", "x", std::nullopt}, user})
            .starts_with("messages[0].role:"));
  CHECK(RenderError(mistral, {user, user}).starts_with("messages[1]:"));
  CHECK(RenderError(mistral, {user, {"system", "s", std::nullopt}}).starts_with("messages:"));
  // harmony: a developer/system message only first; no channel tags in content.
  CHECK(RenderChat(harmony, {{"developer", "d", std::nullopt}, user}).ok());
  CHECK(RenderError(harmony, {user, {"developer", "d", std::nullopt}})
            .starts_with("messages[1].role:"));
  CHECK(
      RenderError(harmony, {user, {"system", "s", std::nullopt}}).starts_with("messages[1].role:"));
  CHECK(RenderError(harmony, {user, {"assistant", "<|channel|>final<|message|>x", std::nullopt}})
            .starts_with("messages[1].content:"));
  // Options a family does not have.
  ChatOptions think_on, think_off, effort, bad_effort;
  think_on.enable_thinking = true;
  think_off.enable_thinking = false;
  effort.reasoning_effort = "high";
  bad_effort.reasoning_effort = "max";
  CHECK(RenderChat(qwen3, {user}, think_on).ok());
  CHECK(RenderChat(qwen3, {user}, think_off).ok());
  CHECK(RenderChat(chatml, {user}, think_off).ok());  // asks for nothing
  CHECK(RenderError(chatml, {user}, think_on).starts_with("chat_template_kwargs.enable_thinking:"));
  CHECK(RenderChat(harmony, {user}, think_on).ok());
  CHECK(
      RenderError(harmony, {user}, think_off).starts_with("chat_template_kwargs.enable_thinking:"));
  CHECK(RenderChat(harmony, {user}, effort).ok());
  CHECK(RenderError(qwen3, {user}, effort).starts_with("reasoning_effort:"));
  CHECK(RenderError(harmony, {user}, bad_effort).starts_with("reasoning_effort:"));
  // The date defaults to today: a YYYY-MM-DD in the system message.
  absl::StatusOr<std::string> today = RenderChat(harmony, {user});
  REQUIRE(today.ok());
  const size_t at = today->find("Current date: ");
  REQUIRE(at != std::string::npos);
  const std::string date = today->substr(at + 14, 12);
  CHECK(date[4] == '-');
  CHECK(date[7] == '-');
  CHECK(date.substr(10) == "\n\n");
}

// Runs `pieces` through a splitter and returns (reasoning, content).
std::pair<std::string, std::string> Split(
    const ChatFormat& f, const std::vector<std::pair<int32_t, std::string>>& pieces) {
  ChatReplySplitter s(f);
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
  const ChatFormat qwen3 = Format(ChatFamily::kQwen3);
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
  CHECK(Split(Format(ChatFamily::kChatML), Pieces(reply, 3)) ==
        std::pair<std::string, std::string>{"", reply});
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

TEST_CASE("chat templates: the header's usage example, on a real tokenizer", "[main_node][chat]") {
  auto file = GgufFile::Open(test::SourcePath("tests/data/gpt2-tokenizer.gguf"));
  REQUIRE(file.ok());
  auto loaded = Tokenizer::FromGguf(**file);
  REQUIRE(loaded.ok());
  const Tokenizer& tok = **loaded;
  auto text = [&tok](int32_t id) { return id < 0 ? std::string() : tok.vocab().tokens[id]; };
  ChatVocab vocab{text(tok.bos_id()), text(tok.eos_id()),
                  [&tok](std::string_view t) { return tok.TokenId(t); }};
  ChatFormat format = DetectChatFormat(
      std::string("{{ bos_token }}{{ 'Assistant: ' + message['content'] + eos_token }}"), vocab);
  CHECK(format.family == ChatFamily::kDeepSeek);
  const std::vector<ChatMessage> messages = {{"user", "Hi", std::nullopt}};
  absl::StatusOr<std::string> prompt = RenderChat(format, messages);
  REQUIRE(prompt.ok());
  CHECK(*prompt == vocab.bos_text + "User: Hi\n\nAssistant:");
  ChatReplySplitter split(format);
  CHECK(split.Push(0, "Hello").content == "Hello");
  CHECK(split.Flush().content.empty());
}

}  // namespace
}  // namespace odmoe
