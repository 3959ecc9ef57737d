#include "main_node/chat_template.h"

#include <algorithm>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace odmoe {
namespace {

using ojson = nlohmann::ordered_json;

// The reasoning markers of the kThink family, by the close marker the
// template writes (the first row whose markers it has wins).
struct ThinkMarkers {
  std::string_view open;
  std::string_view close;
};
constexpr ThinkMarkers kThinkMarkers[] = {
    {"<think>", "</think>"},
    {"<|channel>thought", "<channel|>"},  // Gemma 4's thought channel
};

// The renderer of a model file without a template: one "role: content" line
// per message, then "assistant:" (content parts are joined; tool calls are
// not shown).
// With tools (a file without a template has no syntax of its own; its
// replies are parsed as Hermes calls: tool_call_syntax.h), a first line
// lists them and says how to call one, and an assistant turn's calls are
// written in that syntax.
constexpr char kFallbackTemplate[] =
    "{% if tools %}system: You may call these tools. To call one, answer with "
    "<tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>.\n"
    "{% for t in tools %}{{ t | tojson }}\n{% endfor %}{% endif %}"
    "{% for m in messages %}{{ m.role }}: {{ m.content if m.content is string else '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{\"name\": {{ c.function.name | tojson }}, "
    "\"arguments\": {{ c.function.arguments | tojson if c.function.arguments is mapping "
    "else c.function.arguments }}}</tool_call>{% endfor %}{{ '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

// A text part only a template that renders content lists itself writes out.
constexpr char kPartsProbe[] = "odmoe-content-parts-probe";

std::string_view RStrip(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

bool Has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// strftime_now: of ChatOptions::date (YYYY-MM-DD) when set, else of now.
std::string Strftime(const std::string& date, const std::string& format) {
  std::tm tm{};
  if (date.size() == 10 &&
      std::sscanf(date.c_str(), "%4d-%2d-%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) == 3) {
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_hour = 12;
    std::mktime(&tm);  // fills the weekday
    char buf[256];
    size_t n = format.empty() ? 0 : std::strftime(buf, sizeof(buf), format.c_str(), &tm);
    return std::string(buf, n);
  }
  return jinja::StrftimeNow(format);
}

ojson MessageJson(const ChatMessage& m, bool content_parts, bool null_as_empty) {
  ojson j = ojson::object();
  j["role"] = m.role;
  if (m.content_parts) {
    if (content_parts) {
      j["content"] = *m.content_parts;
    } else {
      std::string text;
      for (const ojson& p : *m.content_parts) {
        if (!p.is_object() || p.value("type", ojson()) != "text" || !p.contains("text") ||
            !p["text"].is_string())
          continue;
        if (!text.empty()) text += "\n";
        text += p["text"].get<std::string>();
      }
      j["content"] = text;
    }
  } else if (m.content_null && !null_as_empty) {
    j["content"] = nullptr;
  } else {
    j["content"] = m.content;
  }
  if (m.reasoning_content) j["reasoning_content"] = *m.reasoning_content;
  if (!m.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const ChatToolCall& c : m.tool_calls) {
      ojson call = ojson::object();
      if (!c.id.empty()) call["id"] = c.id;
      call["type"] = c.type;
      call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

}  // namespace

absl::StatusOr<ChatFormat> CompileChatFormat(const std::optional<std::string>& chat_template,
                                             const ChatVocab& vocab,
                                             const std::optional<std::string>& tool_use_template) {
  ChatFormat f;
  if (tool_use_template.has_value()) {
    absl::StatusOr<jinja::Template> t =
        jinja::Template::Compile(*tool_use_template, "tool_use template");
    if (!t.ok()) return t.status();
    f.tool_use = std::make_shared<const jinja::Template>(std::move(*t));
  }
  f.bos_text = vocab.bos_text;
  f.eos_text = vocab.eos_text;
  f.has_template = chat_template.has_value();
  absl::StatusOr<jinja::Template> t =
      jinja::Template::Compile(f.has_template ? *chat_template : kFallbackTemplate);
  if (!t.ok()) return t.status();
  f.jinja = std::make_shared<const jinja::Template>(std::move(*t));
  if (!f.has_template) return f;
  const std::string_view text = *chat_template;
  if (Has(text, "<|start|>") && Has(text, "<|channel|>") && Has(text, "<|message|>")) {
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
  } else {
    for (const ThinkMarkers& m : kThinkMarkers) {
      if (Has(text, m.close)) {
        f.family = ChatFamily::kThink;
        f.think_open = m.open;
        f.think_close = m.close;
        break;
      }
    }
  }
  // Content parts: kept as a list where the template writes their text itself.
  ChatMessage probe{"user", "", std::nullopt};
  probe.content_parts = ojson::array({{{"type", "text"}, {"text", kPartsProbe}}});
  f.content_parts = true;
  absl::StatusOr<std::string> out = RenderChat(f, {probe});
  f.content_parts = out.ok() && Has(*out, kPartsProbe) && !Has(*out, "'type': 'text'");
  // Content null on an assistant turn that calls a tool: "" where it fails or shows.
  ChatMessage call{"assistant", "", std::nullopt};
  call.content_null = true;
  call.tool_calls = {{"call_0", "function", kPartsProbe, ojson::object()}};
  out = RenderChat(f, {ChatMessage{"user", "x", std::nullopt}, call});
  f.null_content_as_empty = !out.ok() || Has(*out, "None");
  return f;
}

const char* ChatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kThink:
      return "think";
    case ChatFamily::kHarmony:
      return "harmony";
    case ChatFamily::kPlain:
      break;
  }
  return "plain";
}

ojson ChatContext(const ChatFormat& format, const std::vector<ChatMessage>& messages,
                  const ChatOptions& options) {
  ojson msgs = ojson::array();
  for (const ChatMessage& m : messages) {
    msgs.push_back(MessageJson(m, format.content_parts, format.null_content_as_empty));
  }
  ojson ctx = ojson::object();
  ctx["messages"] = std::move(msgs);
  ctx["tools"] = options.tools;
  ctx["documents"] = options.documents;
  ctx["add_generation_prompt"] = options.add_generation_prompt;
  ctx["continue_final_message"] = false;
  ctx["bos_token"] = format.bos_text;
  ctx["eos_token"] = format.eos_text;
  if (options.template_kwargs.is_object()) {
    for (auto it = options.template_kwargs.begin(); it != options.template_kwargs.end(); ++it) {
      ctx[it.key()] = it.value();
    }
  }
  if (options.enable_thinking) ctx["enable_thinking"] = *options.enable_thinking;
  if (options.reasoning_effort) ctx["reasoning_effort"] = *options.reasoning_effort;
  return ctx;
}

absl::StatusOr<std::string> RenderChat(const ChatFormat& format,
                                       const std::vector<ChatMessage>& messages,
                                       const ChatOptions& options) {
  if (messages.empty())
    return absl::InvalidArgumentError("messages: expected at least one message");
  if (format.jinja == nullptr) return absl::FailedPreconditionError("chat format not compiled");
  if (!format.has_template) {  // the fallback knows the OpenAI roles only
    for (size_t i = 0; i < messages.size(); ++i) {
      const std::string& r = messages[i].role;
      if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
        return absl::InvalidArgumentError(absl::StrCat(
            "messages[", i, "].role: expected system, developer, user, assistant or tool"));
      }
    }
  }
  jinja::RenderOptions render;
  const std::string date = options.date;
  render.strftime_now = [date](const std::string& fmt) { return Strftime(date, fmt); };
  // transformers' rule: the named template "tool_use" when the request has tools.
  const jinja::Template& tmpl =
      format.tool_use != nullptr && !options.tools.is_null() && !options.tools.empty()
          ? *format.tool_use
          : *format.jinja;
  absl::StatusOr<std::string> out = tmpl.Render(ChatContext(format, messages, options), render);
  if (!out.ok())
    return absl::Status(out.status().code(), absl::StrCat("messages: ", out.status().message()));
  return out;
}

// ---------------------------------------------------------------------------
// Replies.

ChatReplySplitter::ChatReplySplitter(const ChatFormat& format, std::string_view prompt)
    : family_(format.family),
      harmony_(format.harmony),
      think_open_(format.think_open),
      think_close_(format.think_close),
      state_(format.family == ChatFamily::kHarmony ? State::kHarmonyHeader : State::kStart) {
  // Without its control tokens harmony's channels cannot be seen: pass through.
  if (family_ == ChatFamily::kHarmony && (harmony_.channel < 0 || harmony_.message < 0)) {
    state_ = State::kContent;
  }
  // The template opened the think block (DeepSeek-R1, GLM, Qwen3-Thinking ...):
  // the reply starts inside it.
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' '))
    prompt.remove_suffix(1);
  if (family_ == ChatFamily::kThink && prompt.ends_with(think_open_)) state_ = State::kReasoning;
}

ChatReplyPiece ChatReplySplitter::Push(int32_t id, std::string_view piece) {
  ChatReplyPiece out;
  if (state_ == State::kContent) {
    out.content.assign(piece);
  } else if (family_ == ChatFamily::kHarmony) {
    PushHarmony(id, piece, &out);
  } else if (family_ == ChatFamily::kThink) {
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
        if (rest.starts_with(std::string_view(think_open_))) {
          held_.erase(0, text + think_open_.size());
          state_ = State::kReasoning;
          continue;
        }
        if (std::string_view(think_open_).starts_with(rest)) return;  // "<thi": wait
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        if (!reasoning_started_) {
          held_.erase(0, held_.find_first_not_of('\n'));
          if (held_.empty()) return;
          reasoning_started_ = true;
        }
        const size_t close = held_.find(std::string_view(think_close_));
        if (close != std::string::npos) {
          out->reasoning.append(RStrip(std::string_view(held_).substr(0, close), '\n'));
          held_.erase(0, close + think_close_.size());
          state_ = State::kAfterReasoning;
          continue;
        }
        // Release all but a possible start of </think> and the newlines
        // before it (stripped when the block closes).
        std::string_view ready = std::string_view(held_);
        ready.remove_suffix(PartialTail(ready, std::string_view(think_close_)));
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
    header_.clear();
    channel_.clear();
    in_channel_name_ = false;
    return;
  }
  if (id == h.end || id == h.return_ || id == h.call) {
    // A tool call's message ends with <|call|>, which the call's text needs.
    if (state_ == State::kHarmonyBody && in_call_ && id == h.call) out->content.append("<|call|>");
    state_ = State::kHarmonyIdle;
    in_call_ = false;
    return;
  }
  switch (state_) {
    case State::kHarmonyHeader:
      if (id == h.message) {
        // A message with a recipient ("commentary to=functions.NAME") is a
        // tool call: its header and body go out as harmony text, for the
        // tool-call parser (tool_call_syntax.h's harmony row). Otherwise the
        // channel is the header's first word; no channel = content.
        in_call_ = header_.find("to=") != std::string::npos;
        if (in_call_) {
          out->content.append(header_.starts_with("<|channel|>") ? "" : "<|start|>");
          out->content.append(header_).append("<|message|>");
        }
        const size_t word = channel_.find_first_of(" <");
        channel_ = channel_.substr(0, word);
        state_ = State::kHarmonyBody;
        saw_body_ = true;
        held_.clear();
        header_.clear();
      } else if (id == h.channel) {
        in_channel_name_ = true;
        header_.append("<|channel|>");
      } else {
        held_.append(piece);
        header_.append(piece);
        if (in_channel_name_) channel_.append(piece);
      }
      return;
    case State::kHarmonyBody:
      if (in_call_ || channel_.empty() || channel_ == "final") {
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
