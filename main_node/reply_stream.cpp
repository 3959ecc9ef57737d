#include "main_node/reply_stream.h"

#include <algorithm>

#include "main_node/tool_call_json.h"
#include "main_node/tool_call_syntax.h"

namespace odmoe {

ReplyStream::ReplyStream(Options options)
    : split_(options.format != nullptr ? *options.format : ChatFormat{}, options.prompt),
      stop_(std::move(options.stop)),
      special_text_(std::move(options.special_text)) {
  if (options.tools != nullptr && options.tools->choice.kind != ToolChoiceKind::kNone &&
      !options.tools->tools.empty()) {
    parser_ = std::make_unique<ToolCallStreamParser>(options.syntax, options.tools->tools,
                                                     options.id_seed);
    markers_ = ToolCallMarkerTexts(ToolCallSyntaxSpecOf(options.syntax));
    // Harmony's splitter writes a call's message out as harmony text itself
    // (its headers are control tokens the splitter reads).
    harmony_ = options.format != nullptr && options.format->family == ChatFamily::kHarmony;
  }
}

void ReplyStream::Push(int32_t id, std::string_view piece, std::vector<ReplyEvent>* out) {
  ChatReplyPiece p = split_.Push(id, piece);
  // A tool-call marker that is a control token decodes to nothing: the
  // parser gets its text (after any reasoning the splitter released).
  if (parser_ != nullptr && !harmony_ && piece.empty() && special_text_ && id >= 0) {
    std::string text = special_text_(id);
    if (!text.empty() && std::find(markers_.begin(), markers_.end(), text) != markers_.end()) {
      p.content += text;
    }
  }
  Take(p, out);
}

void ReplyStream::Finish(std::vector<ReplyEvent>* out) {
  Take(split_.Flush(), out);
  if (parser_ != nullptr) {
    scratch_.clear();
    parser_->Finish(&scratch_);
    Calls(scratch_, out);
  }
  const std::string tail = stop_.Flush();
  if (!tail.empty()) Emit({ReplyEvent::Kind::kContent, tail}, out);
}

std::string ReplyStream::FinishReason(std::string_view otherwise) const {
  return ToolCallFinishReason(calls_, otherwise);
}

void ReplyStream::Take(const ChatReplyPiece& piece, std::vector<ReplyEvent>* out) {
  if (!piece.reasoning.empty() && !stop_.stopped()) {
    Emit({ReplyEvent::Kind::kReasoning, piece.reasoning}, out);
  }
  if (piece.content.empty()) return;
  if (parser_ == nullptr) return Content(piece.content, out);
  scratch_.clear();
  parser_->Feed(piece.content, &scratch_);
  Calls(scratch_, out);
}

void ReplyStream::Calls(const std::vector<ToolCallEvent>& events, std::vector<ReplyEvent>* out) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        Content(e.text, out);
        break;
      case ToolCallEvent::Kind::kCallBegin:
        ApplyToolCallEvent(e, &calls_);
        Emit({ReplyEvent::Kind::kToolCallBegin, "", e.index, e.id, e.name}, out);
        break;
      case ToolCallEvent::Kind::kCallArguments:
        ApplyToolCallEvent(e, &calls_);
        Emit({ReplyEvent::Kind::kToolCallArguments, e.text, e.index}, out);
        break;
      case ToolCallEvent::Kind::kCallEnd:
        break;
      case ToolCallEvent::Kind::kCallAbort:
        // The whole reply keeps the malformed call's text as content; a
        // stream, which already announced the call, sends it as content too.
        if (!calls_.tool_calls.empty()) calls_.tool_calls.pop_back();
        Content(e.text, out);
        break;
    }
  }
}

void ReplyStream::Content(std::string_view text, std::vector<ReplyEvent>* out) {
  const std::string released = stop_.Push(text);
  if (!released.empty()) Emit({ReplyEvent::Kind::kContent, released}, out);
}

void ReplyStream::Emit(ReplyEvent event, std::vector<ReplyEvent>* out) {
  if (event.kind == ReplyEvent::Kind::kContent) content_ += event.text;
  if (event.kind == ReplyEvent::Kind::kReasoning) reasoning_ += event.text;
  out->push_back(std::move(event));
}

}  // namespace odmoe
