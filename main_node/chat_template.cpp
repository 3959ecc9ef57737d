#include "main_node/chat_template.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "main_node/http_reply.h"  // ClipForMessage

namespace odmoe {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// Debian's Abseil has its own string_view.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool Has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

bool HasAll(std::string_view text, std::initializer_list<std::string_view> markers) {
  for (std::string_view m : markers) {
    if (!Has(text, m)) return false;
  }
  return true;
}

// The system prompt a ChatML template writes when the conversation has none:
// a string literal "<|im_start|>system\n<text><|im_end|>" whose text is plain
// (no quote, no concatenation), as Qwen1.5/2/2.5 write it. The newline after
// "system" may be a real one or Jinja's escape "\n".
std::string ChatMLDefaultSystem(std::string_view tmpl) {
  constexpr std::string_view kHead = "<|im_start|>system";
  constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = tmpl.find(kHead); at != std::string_view::npos; at = tmpl.find(kHead, at + 1)) {
    std::string_view rest = tmpl.substr(at + kHead.size());
    if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const size_t end = rest.find(kEnd);
    if (end == std::string_view::npos || end == 0) continue;
    const std::string_view text = rest.substr(0, end);
    if (text.find_first_of("'\"+{}") != std::string_view::npos) continue;
    return absl::StrReplaceAll(Sv(text), {{"\\n", "\n"}});
  }
  return "";
}

// Python's str.lstrip / rstrip / strip of one character.
std::string_view LStrip(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}
std::string_view RStrip(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

absl::Status CheckRoles(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return absl::InvalidArgumentError("messages: at least one is needed");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r == "system" || r == "user" || r == "assistant") continue;
    if (r == "developer" && format.family == ChatFamily::kHarmony) {
      if (i == 0) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "].role: a developer message must come first"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("messages[", i, "].role: '", ClipForMessage(r), "' is not one of system, user, assistant",
                     format.family == ChatFamily::kHarmony ? " (or developer, first)" : ""));
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const ChatFormat& format, const ChatOptions& options) {
  const char* name = ChatFamilyName(format.family);
  if (options.enable_thinking.has_value()) {
    const bool on = *options.enable_thinking;
    if (format.family == ChatFamily::kHarmony && !on) {
      return absl::InvalidArgumentError(
          "chat_template_kwargs.enable_thinking: this model (chat format harmony) always "
          "reasons; ask for less with reasoning_effort: \"low\"");
    }
    if (on && format.family != ChatFamily::kHarmony && format.family != ChatFamily::kQwen3) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat_template_kwargs.enable_thinking: this model's chat format (", name,
                       ") has no thinking mode"));
    }
  }
  if (options.reasoning_effort.has_value()) {
    if (format.family != ChatFamily::kHarmony) {
      return absl::InvalidArgumentError(absl::StrCat("reasoning_effort: this model's chat format (",
                                                     name, ") has no reasoning effort"));
    }
    const std::string& e = *options.reasoning_effort;
    if (e != "low" && e != "medium" && e != "high") {
      return absl::InvalidArgumentError("reasoning_effort: expected low, medium or high");
    }
  }
  return absl::OkStatus();
}

std::string RenderChatML(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  std::string out;
  if (!format.default_system.empty() && messages[0].role != "system") {
    absl::StrAppend(&out, "<|im_start|>system\n", format.default_system, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  absl::StrAppend(&out, "<|im_start|>assistant\n");
  return out;
}

// Qwen3's template: reasoning of assistant turns before the last real user
// query is dropped; after it, kept (and always shown on the last message).
std::string RenderQwen3(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  const size_t n = messages.size();
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (m.role == "user" && !(absl::StartsWith(m.content, "<tool_response>") &&
                              absl::EndsWith(m.content, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" || m.role == "user") {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (m.reasoning_content.has_value()) {
      reasoning = *m.reasoning_content;
    } else if (const size_t close = content.find(kThinkClose); close != std::string_view::npos) {
      // content.split('</think>')[-1].lstrip('\n') and
      // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
      std::string_view before = RStrip(content.substr(0, close), '\n');
      if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos) {
        before.remove_prefix(open + kThinkOpen.size());
      }
      reasoning = LStrip(before, '\n');
      content = LStrip(content.substr(content.rfind(kThinkClose) + kThinkClose.size()), '\n');
    }
    if (i > last_query && (i + 1 == n || !reasoning.empty())) {
      absl::StrAppend(&out, "<|im_start|>assistant\n<think>\n",
                      Sv(RStrip(LStrip(reasoning, '\n'), '\n')), "\n</think>\n\n",
                      Sv(LStrip(content, '\n')));
    } else {
      absl::StrAppend(&out, "<|im_start|>assistant\n", Sv(content));
    }
    absl::StrAppend(&out, "<|im_end|>\n");
  }
  absl::StrAppend(&out, "<|im_start|>assistant\n");
  if (options.enable_thinking == false) absl::StrAppend(&out, "<think>\n\n</think>\n\n");
  return out;
}

std::string RenderDeepSeek(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  std::string out = format.writes_bos ? format.bos_text : "";
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      absl::StrAppend(&out, "User: ", m.content, "\n\n");
    } else if (m.role == "assistant") {
      absl::StrAppend(&out, "Assistant: ", m.content, format.eos_text);
    } else {
      absl::StrAppend(&out, m.content, "\n\n");
    }
  }
  absl::StrAppend(&out, "Assistant:");
  return out;
}

std::string RenderTulu(const ChatFormat& format, const std::vector<ChatMessage>& messages) {
  std::string out = format.writes_bos ? format.bos_text : "";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant") {
      absl::StrAppend(&out, "<|assistant|>\n", m.content, format.eos_text,
                      i + 1 < messages.size() || !format.tulu_bare_last ? "\n" : "");
    } else {
      absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "\n");
    }
  }
  absl::StrAppend(&out, "<|assistant|>\n");
  return out;
}

absl::StatusOr<std::string> RenderHarmony(const std::vector<ChatMessage>& messages,
                                          const ChatOptions& options) {
  const std::string date = options.date.empty()
                               ? absl::FormatTime("%Y-%m-%d", absl::Now(), absl::LocalTimeZone())
                               : options.date;
  std::string out = absl::StrCat(
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: ",
      date, "\n\nReasoning: ", options.reasoning_effort.value_or("medium"),
      "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
      "message.<|end|>");
  size_t first = 0;
  if (messages[0].role == "system" || messages[0].role == "developer") {
    first = 1;
    if (!messages[0].content.empty()) {
      absl::StrAppend(&out, "<|start|>developer<|message|># Instructions\n\n", messages[0].content,
                      "\n\n<|end|>");
    }
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      absl::StrAppend(&out, "<|start|>user<|message|>", m.content, "<|end|>");
    } else if (m.role == "assistant") {
      if (absl::StrContains(m.content, "<|channel|>analysis<|message|>") ||
          absl::StrContains(m.content, "<|channel|>final<|message|>")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "messages[", i,
            "].content: contains harmony <|channel|> tags; send the final answer as content "
            "(and reasoning as reasoning_content)"));
      }
      // The analysis channel of earlier turns is dropped, as the template does.
      absl::StrAppend(&out, "<|start|>assistant<|channel|>final<|message|>", m.content, "<|end|>");
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i,
                       "].role: this model's chat format (harmony) takes a system or "
                       "developer message only first"));
    }
  }
  absl::StrAppend(&out, "<|start|>assistant");
  return out;
}

absl::StatusOr<std::string> RenderMistral(const std::vector<ChatMessage>& messages) {
  std::string out;
  std::string system;
  bool expect_user = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      if (i != 0) {
        return absl::InvalidArgumentError("messages: a system message must come first");
      }
      system = m.content + "\n\n";
      continue;
    }
    if ((m.role == "user") != expect_user) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i,
          "]: this model's chat format needs user and assistant turns to alternate, starting "
          "with user"));
    }
    if (m.role == "user") {
      absl::StrAppend(&out, "[INST] ", system, m.content, " [/INST]");
      system.clear();
    } else {
      absl::StrAppend(&out, m.content, "</s>");
    }
    expect_user = !expect_user;
  }
  return out;
}

}  // namespace

ChatFormat DetectChatFormat(const std::optional<std::string>& chat_template,
                            const ChatVocab& vocab) {
  ChatFormat f;
  f.bos_text = vocab.bos_text;
  f.eos_text = vocab.eos_text;
  if (!chat_template) return f;
  f.has_template = true;
  const std::string_view t = *chat_template;
  if (HasAll(t, {"<|start|>", "<|channel|>", "<|message|>"})) {
    f.family = ChatFamily::kHarmony;
    if (vocab.token_id) {
      HarmonyTokenIds& h = f.harmony;
      h.start = vocab.token_id("<|start|>");
      h.channel = vocab.token_id("<|channel|>");
      h.message = vocab.token_id("<|message|>");
      h.end = vocab.token_id("<|end|>");
      h.return_ = vocab.token_id("<|return|>");
      h.call = vocab.token_id("<|call|>");
    }
  } else if (HasAll(t, {"<|im_start|>", "enable_thinking", "</think>"})) {
    f.family = ChatFamily::kQwen3;
  } else if (Has(t, "<|im_start|>")) {
    f.family = ChatFamily::kChatML;
    f.default_system = ChatMLDefaultSystem(t);
  } else if (Has(t, "'Assistant: ' + message['content'] + eos_token")) {
    f.family = ChatFamily::kDeepSeek;
  } else if (HasAll(t, {"<|user|>", "<|assistant|>", "eos_token"}) && !Has(t, "<|end|>")) {
    f.family = ChatFamily::kTulu;
  } else if (Has(t, "[INST]")) {
    f.family = ChatFamily::kMistral;
  }
  f.tulu_bare_last = f.family == ChatFamily::kTulu && Has(t, "not loop.last");
  f.writes_bos =
      (f.family == ChatFamily::kDeepSeek || f.family == ChatFamily::kTulu) && Has(t, "bos_token");
  return f;
}

const char* ChatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kMistral:
      return "mistral";
    case ChatFamily::kChatML:
      return "chatml";
    case ChatFamily::kQwen3:
      return "qwen3";
    case ChatFamily::kDeepSeek:
      return "deepseek";
    case ChatFamily::kTulu:
      return "tulu";
    case ChatFamily::kHarmony:
      return "harmony";
    case ChatFamily::kDefault:
      break;
  }
  return "default";
}

absl::StatusOr<std::string> RenderChat(const ChatFormat& format,
                                       const std::vector<ChatMessage>& messages,
                                       const ChatOptions& options) {
  if (absl::Status s = CheckRoles(format, messages); !s.ok()) return s;
  if (absl::Status s = CheckOptions(format, options); !s.ok()) return s;
  switch (format.family) {
    case ChatFamily::kChatML:
      return RenderChatML(format, messages);
    case ChatFamily::kQwen3:
      return RenderQwen3(messages, options);
    case ChatFamily::kDeepSeek:
      return RenderDeepSeek(format, messages);
    case ChatFamily::kTulu:
      return RenderTulu(format, messages);
    case ChatFamily::kHarmony:
      return RenderHarmony(messages, options);
    case ChatFamily::kMistral:
      return RenderMistral(messages);
    case ChatFamily::kDefault:
      break;
  }
  std::string out;
  for (const ChatMessage& m : messages) absl::StrAppend(&out, m.role, ": ", m.content, "\n");
  absl::StrAppend(&out, "assistant:");
  return out;
}

// ---------------------------------------------------------------------------
// Replies.

ChatReplySplitter::ChatReplySplitter(const ChatFormat& format)
    : family_(format.family),
      harmony_(format.harmony),
      state_(format.family == ChatFamily::kHarmony ? State::kHarmonyHeader : State::kStart) {
  // Without its control tokens harmony's channels cannot be seen: pass through.
  if (family_ == ChatFamily::kHarmony && (harmony_.channel < 0 || harmony_.message < 0)) {
    state_ = State::kContent;
  }
}

ChatReplyPiece ChatReplySplitter::Push(int32_t id, std::string_view piece) {
  ChatReplyPiece out;
  if (state_ == State::kContent) {
    out.content.assign(piece);
  } else if (family_ == ChatFamily::kHarmony) {
    PushHarmony(id, piece, &out);
  } else if (family_ == ChatFamily::kQwen3) {
    PushThink(piece, &out);
  } else {
    out.content.assign(piece);
  }
  return out;
}

namespace {

// The length of the longest tail of `text` that is a proper prefix of `marker`.
size_t PartialTail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

void ChatReplySplitter::PushThink(std::string_view piece, ChatReplyPiece* out) {
  held_.append(piece);
  for (;;) {
    switch (state_) {
      case State::kStart: {
        const size_t text = held_.find_first_not_of(" \t\r\n");
        if (text == std::string::npos) return;  // only whitespace so far
        const std::string_view rest = std::string_view(held_).substr(text);
        if (rest.starts_with(kThinkOpen)) {
          held_.erase(0, text + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (kThinkOpen.starts_with(rest)) return;  // "<thi": wait
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        if (!reasoning_started_) {
          held_.erase(0, held_.find_first_not_of('\n'));
          if (held_.empty()) return;
          reasoning_started_ = true;
        }
        const size_t close = held_.find(kThinkClose);
        if (close != std::string::npos) {
          out->reasoning.append(RStrip(std::string_view(held_).substr(0, close), '\n'));
          held_.erase(0, close + kThinkClose.size());
          state_ = State::kAfterReasoning;
          continue;
        }
        // Release all but a possible start of </think> and the newlines
        // before it (stripped when the block closes).
        std::string_view ready = std::string_view(held_);
        ready.remove_suffix(PartialTail(ready, kThinkClose));
        ready = RStrip(ready, '\n');
        out->reasoning.append(ready);
        held_.erase(0, ready.size());
        return;
      }
      case State::kAfterReasoning:
        held_.erase(0, held_.find_first_not_of('\n'));
        if (held_.empty()) return;
        state_ = State::kContent;
        continue;
      default:  // kContent
        out->content.append(held_);
        held_.clear();
        return;
    }
  }
}

void ChatReplySplitter::PushHarmony(int32_t id, std::string_view piece, ChatReplyPiece* out) {
  const HarmonyTokenIds& h = harmony_;
  if (id == h.start) {
    state_ = State::kHarmonyHeader;
    held_.clear();
    channel_.clear();
    in_channel_name_ = false;
    return;
  }
  if (id == h.end || id == h.return_ || id == h.call) {
    state_ = State::kHarmonyIdle;
    return;
  }
  switch (state_) {
    case State::kHarmonyHeader:
      if (id == h.message) {
        // "final commentary to=..." -> the first word; no channel = content.
        const size_t word = channel_.find_first_of(" <");
        channel_ = channel_.substr(0, word);
        state_ = State::kHarmonyBody;
        saw_body_ = true;
        held_.clear();
      } else if (id == h.channel) {
        in_channel_name_ = true;
      } else {
        held_.append(piece);
        if (in_channel_name_) channel_.append(piece);
      }
      return;
    case State::kHarmonyBody:
      if (channel_.empty() || channel_ == "final") {
        out->content.append(piece);
      } else {
        out->reasoning.append(piece);
      }
      return;
    default:  // kHarmonyIdle: text outside any message (not harmony): keep it
      out->content.append(piece);
      return;
  }
}

ChatReplyPiece ChatReplySplitter::Flush() {
  ChatReplyPiece out;
  switch (state_) {
    case State::kStart:
      out.content = std::move(held_);
      break;
    case State::kReasoning:
      out.reasoning.assign(RStrip(held_, '\n'));
      break;
    case State::kHarmonyHeader:
      // A reply that never opened a message is not harmony: it is the answer.
      if (!saw_body_) out.content = std::move(held_);
      break;
    default:
      break;
  }
  held_.clear();
  state_ = State::kContent;
  return out;
}

}  // namespace odmoe
