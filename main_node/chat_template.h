// Chat messages -> prompt text, and a chat reply -> (reasoning, content).
//
// The model file's `tokenizer.chat_template` is a Jinja program. No maintained
// C++ Jinja engine is packaged in Debian 12, so odmoe does not run it: it
// recognises the template's family by distinctive markers in its text and
// renders that family with a hand-written renderer that produces the bytes
// the Jinja template produces (with add_generation_prompt = true). The
// renderers are checked byte for byte against the real templates rendered by
// Python's jinja2 (scripts/fixtures/make_chat_golden.py ->
// tests/data/golden/chat_templates.json -> tests/main_node/chat_template_test.cpp).
//
//   family    detected when the template contains            models
//   harmony   <|start|> and <|channel|> and <|message|>      gpt-oss
//   qwen3     <|im_start|> and enable_thinking and </think>  Qwen3 (-30B-A3B ...)
//   chatml    <|im_start|>                                    Qwen1.5/Qwen2/Qwen2.5(-MoE)
//   deepseek  'Assistant: ' + message['content'] + eos_token DeepSeek-V2(-Lite)-Chat
//   tulu      <|user|> and <|assistant|> and eos_token,       OLMoE-1B-7B-0924-Instruct
//             neither <|end|> nor <|im_start|>
//   mistral   [INST]                                          Mixtral-Instruct
//   default   no template, or one of none of the above        anything else
//
// What each renders (B = the BOS token's text, E = the EOS token's text):
//   chatml    [<|im_start|>system\n{default system}<|im_end|>\n when the template
//             has a default system prompt and the first message is not a system one]
//             <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//   qwen3     as chatml, without a default system prompt; an assistant turn before
//             the last user message loses its <think>...</think> part; one after it
//             keeps it (the last one always gets a think block, empty or not); with
//             enable_thinking = false the prompt ends <think>\n\n</think>\n\n
//   deepseek  B then per message "User: {c}\n\n" | "Assistant: {c}E" | "{system}\n\n",
//             then "Assistant:"
//   tulu      B then "<|system|>\n{c}\n" | "<|user|>\n{c}\n" | "<|assistant|>\n{c}E\n"
//             (open-instruct's variant: no "\n" after a last assistant turn), then
//             "<|assistant|>\n"
//   harmony   <|start|>system<|message|>{identity, knowledge cutoff, date, reasoning
//             effort, valid channels}<|end|>, a first system/developer message as
//             <|start|>developer<|message|># Instructions\n\n{c}\n\n<|end|>, then
//             <|start|>user<|message|>{c}<|end|> and
//             <|start|>assistant<|channel|>final<|message|>{c}<|end|>, then
//             <|start|>assistant
//   mistral   [INST] {system\n\n}{user} [/INST]{assistant}</s> ... (BOS from the tokenizer)
//   default   {role}: {content}\n ... then "assistant:"
// The BOS text is written only where the template writes `bos_token`; a caller
// that tokenizes the prompt adds the tokenizer's BOS only when the text does
// not start with it (see http_api.cpp), so the model sees one BOS either way.
//
// Replies: qwen3 and harmony models reason before they answer. ChatReplySplitter
// separates a reply's reasoning (qwen3: the <think>...</think> block; harmony:
// the analysis and commentary channels) from its content (qwen3: the rest;
// harmony: the final channel), so the HTTP API returns the reasoning as
// `reasoning_content` and never inside `content`.
//
//   const Tokenizer& tok = ...;
//   auto text = [&tok](int32_t id) { return id < 0 ? std::string() : tok.vocab().tokens[id]; };
//   ChatVocab vocab{text(tok.bos_id()), text(tok.eos_id()),
//                   [&tok](std::string_view t) { return tok.TokenId(t); }};
//   ChatFormat format = DetectChatFormat(gguf.GetString("tokenizer.chat_template"), vocab);
//   ChatOptions options;
//   options.enable_thinking = false;                       // qwen3 only
//   ODMOE_ASSIGN_OR_RETURN(std::string prompt, RenderChat(format, messages, options));
//   ChatReplySplitter split(format);
//   for (auto [id, piece] : generated) {
//     ChatReplyPiece p = split.Push(id, piece);           // p.reasoning, p.content
//   }
//   ChatReplyPiece rest = split.Flush();
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

enum class ChatFamily { kDefault, kMistral, kChatML, kQwen3, kDeepSeek, kTulu, kHarmony };

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

/// A detected chat format: the family plus what its renderer needs.
struct ChatFormat {
  ChatFamily family = ChatFamily::kDefault;
  /// A template was present; with family kDefault it is one odmoe does not know.
  bool has_template = false;
  /// deepseek, tulu: the template writes `bos_token` before the conversation.
  bool writes_bos = false;
  /// tulu: a last assistant turn ends without "\n" (open-instruct's template
  /// has a `not loop.last` branch; OLMoE-Instruct's writes "\n" after every turn).
  bool tulu_bare_last = false;
  std::string bos_text;
  std::string eos_text;
  /// chatml: the system turn the template adds when the conversation has none.
  std::string default_system;
  HarmonyTokenIds harmony;
};

struct ChatMessage {
  std::string role;  // system | user | assistant (harmony: also developer, first only)
  std::string content;
  /// An assistant turn's reasoning as a client sent it back (qwen3 renders it
  /// where its template does; elsewhere it is dropped, as the templates do).
  std::optional<std::string> reasoning_content;
};

/// Per-request switches that templates read besides the messages.
struct ChatOptions {
  /// qwen3: false renders an empty think block (the model answers without
  /// reasoning); unset = the template's default (thinking). harmony: true is
  /// accepted, false is INVALID_ARGUMENT (gpt-oss always reasons). Families
  /// without reasoning: false asks for nothing and is accepted, true is
  /// INVALID_ARGUMENT.
  std::optional<bool> enable_thinking;
  /// harmony: low | medium | high (unset = medium). INVALID_ARGUMENT elsewhere.
  std::optional<std::string> reasoning_effort;
  /// harmony: the "Current date" (YYYY-MM-DD); empty = today, local time.
  std::string date;
};

/// The format of `chat_template` (nullopt: the file has none -> default).
/// Harmony's token ids are looked up through vocab.token_id.
ChatFormat DetectChatFormat(const std::optional<std::string>& chat_template,
                            const ChatVocab& vocab = {});

/// "harmony", "qwen3", "chatml", "deepseek", "tulu", "mistral" or "default".
const char* ChatFamilyName(ChatFamily family);

/// The prompt for `messages`, ending where the assistant's reply begins.
/// INVALID_ARGUMENT naming the parameter ("messages[2].role: ...",
/// "reasoning_effort: ...") for no messages, an unknown role, an order the
/// family cannot express (mistral: user/assistant alternation; harmony: a
/// system message after the first; channel tags in an assistant's content),
/// or an option the family does not have.
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
/// marker ("<thi"). Families without reasoning pass everything as content.
/// harmony: text of the final channel (or of a reply that never opens a
/// channel) is content; analysis and commentary are reasoning; control
/// tokens and headers are dropped. qwen3: a leading <think>...</think> block
/// (without the newlines around it) is reasoning, the rest content.
class ChatReplySplitter {
 public:
  explicit ChatReplySplitter(const ChatFormat& format);

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
  State state_;
  std::string held_;     // text not yet released (qwen3), or the header (harmony)
  std::string channel_;  // harmony: the channel being read ("final", "analysis", ...)
  bool in_channel_name_ = false;
  bool saw_body_ = false;  // harmony: some message body was seen
  bool reasoning_started_ = false;
};

}  // namespace odmoe
