// Chat messages -> prompt text, and a chat reply -> (reasoning, content).
//
// The prompt is the model's own `tokenizer.chat_template`, run by odmoe's
// Jinja engine (common/jinja/template.h) as Hugging Face transformers'
// apply_chat_template runs it: the same context, the same bytes. The
// template is compiled once, when the node starts (CompileChatFormat); a
// construct the engine does not run is a start-up error naming the template
// line, never a wrong prompt. A model file without a template gets a
// documented fallback: one "{role}: {content}\n" line per message, then
// "assistant:" (with tools, a first line lists them and asks for Hermes-style
// <tool_call> calls, the syntax a file without a template is parsed in). A
// file's named template "tool_use" renders requests that carry tools.
//
// The context a template sees (transformers' names):
//   messages               [{role, content, [reasoning_content], [tool_calls],
//                            [tool_call_id], [name]}, ...] (ChatMessage)
//   tools, documents       as the request sent them, or none
//   add_generation_prompt  true unless the request says otherwise
//   continue_final_message false
//   bos_token, eos_token   the tokenizer's BOS and EOS texts
//   <every chat_template_kwargs key>, enable_thinking, reasoning_effort
//   raise_exception(msg), strftime_now(fmt)  (the engine's globals)
// A tool call's `function.arguments` is passed as a dict when the client sent
// a JSON object string (as vLLM does, and transformers' documentation asks:
// Llama 3.x, Mistral and Qwen3-Coder templates iterate or tojson it), else as
// sent. Content sent as parts ([{type: "text", text}]) reaches the template
// as a list when the template renders such lists itself (a probe at compile
// time), else as the parts' texts joined by "\n" (vLLM's rule). An assistant
// turn's content null (OpenAI clients send it with tool calls) reaches the
// template as null, or as "" where the template cannot take null (Qwen3's
// fails on it: a probe at compile time, as llama-server does).
//
// The BOS text is in the prompt only where the template writes `bos_token`;
// a caller that tokenizes the prompt adds the tokenizer's BOS only when the
// text does not start with it (see http_api.cpp).
//
// Replies: reasoning models reason before they answer. ChatReplySplitter
// separates a reply's reasoning (think: the <think>...</think> block, or,
// when the prompt already opened <think>, the text up to </think>; harmony:
// the analysis and commentary channels) from its content, so the HTTP API
// returns the reasoning as `reasoning_content` and never inside `content`.
// The family is detected from the template's text for this purpose only.
//
//   const Tokenizer& tok = ...;
//   auto text = [&tok](int32_t id) { return id < 0 ? std::string() : tok.vocab().tokens[id]; };
//   ChatVocab vocab{text(tok.bos_id()), text(tok.eos_id()),
//                   [&tok](std::string_view t) { return tok.TokenId(t); }};
//   ODMOE_ASSIGN_OR_RETURN(ChatFormat format,
//                          CompileChatFormat(gguf.GetString("tokenizer.chat_template"), vocab));
//   ChatOptions options;
//   options.enable_thinking = false;                       // a chat_template_kwargs key
//   ODMOE_ASSIGN_OR_RETURN(std::string prompt, RenderChat(format, messages, options));
//   ChatReplySplitter split(format, prompt);
//   for (auto [id, piece] : generated) {
//     ChatReplyPiece p = split.Push(id, piece);           // p.reasoning, p.content
//   }
//   ChatReplyPiece rest = split.Flush();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/template.h"
#include "nlohmann/json.hpp"

namespace odmoe {

/// How a model's replies carry reasoning (what ChatReplySplitter looks for).
enum class ChatFamily {
  kPlain,    // no reasoning markup: the reply is content
  kThink,    // a reasoning block between two markers (ChatFormat::think_open / think_close):
             // <think>...</think> (Qwen3, DeepSeek-R1/V3.1, GLM-4.5+, Kimi, MiniMax ...),
             // <|channel>thought ... <channel|> (Gemma 4)
  kHarmony,  // <|start|>, <|channel|>, <|message|>: gpt-oss
};

/// What a template refers to in the tokenizer.
struct ChatVocab {
  std::string bos_text;  // the BOS token's text ("" when the vocab has none)
  std::string eos_text;  // the EOS token's text
  /// The id of an exact token text, or -1 (harmony's <|channel|> ...). May be
  /// empty: the reply splitter then cannot see harmony's channels.
  std::function<int32_t(std::string_view)> token_id;
};

/// harmony's control tokens (-1 where the vocab lacks one).
struct HarmonyTokenIds {
  int32_t start = -1;    // <|start|>
  int32_t channel = -1;  // <|channel|>
  int32_t message = -1;  // <|message|>
  int32_t end = -1;      // <|end|>
  int32_t return_ = -1;  // <|return|>
  int32_t call = -1;     // <|call|>
};

/// A compiled chat template and what rendering and splitting need.
struct ChatFormat {
  ChatFamily family = ChatFamily::kPlain;
  /// The model file has a template (false: the fallback renders).
  bool has_template = false;
  /// The template, or the fallback (never null once compiled).
  std::shared_ptr<const jinja::Template> jinja;
  /// The file's named template "tool_use" (tokenizer.chat_template.tool_use),
  /// rendered instead when a request has tools (transformers' rule); null: none.
  std::shared_ptr<const jinja::Template> tool_use;
  /// The template renders content given as a list of parts itself.
  bool content_parts = false;
  /// The template fails on (or prints "None" for) an assistant turn with
  /// content null: such content reaches it as "" (llama-server's rule).
  bool null_content_as_empty = false;
  std::string bos_text;
  std::string eos_text;
  HarmonyTokenIds harmony;
  /// kThink: the markers around a reply's reasoning (a table in
  /// chat_template.cpp, chosen by which close marker the template writes).
  std::string think_open = "<think>";
  std::string think_close = "</think>";
};

/// One tool call of an assistant turn (OpenAI's message.tool_calls[i]).
struct ChatToolCall {
  std::string id;
  std::string type = "function";
  std::string name;
  /// A dict when the client sent a JSON object string, else the string as sent.
  nlohmann::ordered_json arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_,
              std::optional<std::string> reasoning = std::nullopt)
      : role(std::move(role_)),
        content(std::move(content_)),
        reasoning_content(std::move(reasoning)) {}

  std::string role;  // system | developer | user | assistant | tool | ... (the template decides)
  std::string content;
  /// An assistant turn's reasoning as a client sent it back (templates that
  /// know it render it; the others drop it).
  std::optional<std::string> reasoning_content;
  /// content as parts ([{"type": "text", "text": ...}]); replaces `content`.
  std::optional<nlohmann::ordered_json> content_parts;
  bool content_null = false;  // content: null (an assistant turn that only calls tools)
  std::vector<ChatToolCall> tool_calls;
  std::string tool_call_id;  // role tool: the call it answers
  std::string name;          // role tool: the function's name (where sent)
};

/// Per-request values templates read besides the messages.
struct ChatOptions {
  /// chat_template_kwargs.enable_thinking (unset: not in the context).
  std::optional<bool> enable_thinking;
  /// reasoning_effort or chat_template_kwargs.reasoning_effort.
  std::optional<std::string> reasoning_effort;
  /// Every other chat_template_kwargs key, as sent (an object).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  /// The request's `tools` and `documents` (null: not sent), as sent.
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  bool add_generation_prompt = true;
  /// What strftime_now formats: "YYYY-MM-DD" (tests), empty = now, local time.
  std::string date;
};

/// Compiles `chat_template` (nullopt: the fallback) and, when the file has
/// one, its named template `tool_use_template` (tokenizer.chat_template.tool_use),
/// and detects the reply family. INVALID_ARGUMENT "chat template line N: ..."
/// ("tool_use template line N: ...") for a template the engine cannot run;
/// harmony's token ids are looked up through vocab.token_id.
absl::StatusOr<ChatFormat> CompileChatFormat(
    const std::optional<std::string>& chat_template, const ChatVocab& vocab = {},
    const std::optional<std::string>& tool_use_template = std::nullopt);

/// "plain", "think" or "harmony".
const char* ChatFamilyName(ChatFamily family);

/// The context RenderChat passes the template (for /apply-template's
/// callers and tests).
nlohmann::ordered_json ChatContext(const ChatFormat& format,
                                   const std::vector<ChatMessage>& messages,
                                   const ChatOptions& options);

/// The prompt for `messages`. INVALID_ARGUMENT "messages: ..." for no
/// messages or a template error at render time (raise_exception's message,
/// with the template line).
absl::StatusOr<std::string> RenderChat(const ChatFormat& format,
                                       const std::vector<ChatMessage>& messages,
                                       const ChatOptions& options = {});

/// Text released by ChatReplySplitter: reasoning and content, either may be empty.
struct ChatReplyPiece {
  std::string reasoning;
  std::string content;
};

/// Splits a streamed reply (token id + its decoded text, as generated) into
/// reasoning and content, holding back text that may be the start of a
/// marker ("<thi"). kPlain passes everything as content. harmony: text of the
/// final channel (or of a reply that never opens a channel) is content;
/// analysis and commentary are reasoning; control tokens and headers are
/// dropped. think: a leading <think>...</think> block (without the newlines
/// around it) is reasoning, the rest content; when `prompt` ends with an open
/// <think> (the template started the block), the reply begins as reasoning.
class ChatReplySplitter {
 public:
  explicit ChatReplySplitter(const ChatFormat& format, std::string_view prompt = {});

  ChatReplyPiece Push(int32_t id, std::string_view piece);
  /// The end of the reply: releases what was held back.
  ChatReplyPiece Flush();

 private:
  enum class State {
    kStart,
    kReasoning,
    kAfterReasoning,
    kContent,
    kHarmonyHeader,
    kHarmonyBody,
    kHarmonyIdle
  };
  void PushThink(std::string_view piece, ChatReplyPiece* out);
  void PushHarmony(int32_t id, std::string_view piece, ChatReplyPiece* out);

  ChatFamily family_;
  HarmonyTokenIds harmony_;
  std::string think_open_, think_close_;
  State state_;
  std::string held_;     // text not yet released (think), or the header (harmony)
  std::string channel_;  // harmony: the channel being read ("final", "analysis", ...)
  bool in_channel_name_ = false;
  bool saw_body_ = false;  // harmony: some message body was seen
  bool in_call_ = false;   // harmony: the message has a recipient (a tool call)
  std::string header_;     // harmony: the header as text, <|channel|> included
  bool reasoning_started_ = false;
};

}  // namespace odmoe
