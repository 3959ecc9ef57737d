// A reply as the client sees it, made from the generated tokens as they come:
// a reasoning model's reasoning apart (ChatReplySplitter), then the model's
// tool calls apart (ToolCallStreamParser, when the request offers tools), then
// the stop sequences cut the content (StopMatcher). The non-streamed reply
// and the stream run the same pipeline, so they always agree: the events of a
// stream, applied in order, are the whole reply.
//
//   ReplyStream::Options opt;
//   opt.format = &chat_format;                 // null: a completion (plain text)
//   opt.stop = parsed.stop;
//   opt.tools = &tool_request;                 // null or choice none: no tool calls
//   opt.syntax = ToolCallSyntax::kHermes;
//   opt.id_seed = request_number;
//   opt.special_text = [&tok](int32_t id) { return tok.vocab().tokens[id]; };
//   ReplyStream reply(opt);
//   std::vector<ReplyEvent> events;
//   on_token = [&](int32_t id, std::string_view piece) { reply.Push(id, piece, &events); };
//   ... generate; should_stop = [&] { return reply.stopped(); } ...
//   reply.Finish(&events);
//   reply.content(), reply.reasoning(), reply.tool_calls()   // the whole reply
//   reply.FinishReason("stop")                              // "tool_calls" when it called
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "main_node/chat_template.h"
#include "main_node/stop_matcher.h"
#include "main_node/tool_call_parser.h"
#include "main_node/tool_request.h"

namespace odmoe {

/// One step of a reply, in the order a stream sends them.
struct ReplyEvent {
  enum class Kind {
    kReasoning,          // text: reasoning_content
    kContent,            // text: content
    kToolCallBegin,      // index, id, name
    kToolCallArguments,  // index, text: a fragment of the call's arguments
  };
  Kind kind = Kind::kContent;
  std::string text{};
  int index = -1;
  std::string id{};
  std::string name{};
};

class ReplyStream {
 public:
  struct Options {
    /// The chat format (reasoning split by its family); null for a plain
    /// completion.
    const ChatFormat* format = nullptr;
    /// The rendered prompt (a template that opened <think> for the model
    /// starts the reply in its reasoning: ChatReplySplitter).
    std::string_view prompt;
    std::vector<std::string> stop;
    /// The request's tools; null, or choice kNone: the reply is text.
    const ToolRequest* tools = nullptr;
    ToolCallSyntax syntax = ToolCallSyntax::kHermes;
    uint64_t id_seed = 0;
    /// The text of a control token (decoded replies skip them). Tool-call
    /// markers that are control tokens in the vocabulary (Kimi-K2's
    /// <|tool_call_begin|>, DeepSeek's <｜tool▁sep｜>) reach the parser
    /// through it; other control tokens stay out of the reply.
    std::function<std::string(int32_t id)> special_text;
  };

  explicit ReplyStream(Options options);

  /// A generated token and the text it completes (GenerationCallback).
  void Push(int32_t id, std::string_view piece, std::vector<ReplyEvent>* out);
  /// The end of the reply: releases what was held back.
  void Finish(std::vector<ReplyEvent>* out);
  /// A stop sequence matched: the generation should end.
  bool stopped() const { return stop_.stopped(); }

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_.tool_calls; }
  /// `otherwise` ("stop", "length"), or "tool_calls" when the reply holds
  /// calls and did not end at the token limit.
  std::string FinishReason(std::string_view otherwise) const;

 private:
  void Take(const ChatReplyPiece& piece, std::vector<ReplyEvent>* out);
  void Content(std::string_view text, std::vector<ReplyEvent>* out);
  void Emit(ReplyEvent event, std::vector<ReplyEvent>* out);
  void Calls(const std::vector<ToolCallEvent>& events, std::vector<ReplyEvent>* out);

  ChatReplySplitter split_;
  StopMatcher stop_;
  std::unique_ptr<ToolCallStreamParser> parser_;  // null: no tool calls
  std::vector<std::string> markers_;              // the syntax's marker texts
  bool harmony_ = false;  // the splitter writes tool calls out (ChatReplySplitter)
  std::function<std::string(int32_t)> special_text_;
  std::string content_, reasoning_;
  ParsedReply calls_;
  std::vector<ToolCallEvent> scratch_;
};

}  // namespace odmoe
