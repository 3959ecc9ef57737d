#include "main_node/gemma_call_args.h"

#include <cstdio>

namespace odmoe {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsScalarByte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
         c == '-' || c == '+';
}

// A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// One byte of a string's content as JSON writes it inside quotes.
void AppendEscaped(char c, std::string* json) {
  switch (c) {
    case '"':
      *json += "\\\"";
      return;
    case '\\':
      *json += "\\\\";
      return;
    case '\n':
      *json += "\\n";
      return;
    case '\r':
      *json += "\\r";
      return;
    case '\t':
      *json += "\\t";
      return;
    default:
      break;
  }
  if (static_cast<unsigned char>(c) < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    *json += buf;
    return;
  }
  *json += c;
}

}  // namespace

GemmaArgsTranslator::Step GemmaArgsTranslator::Fail() {
  state_ = State::kError;
  return Step::kError;
}

void GemmaArgsTranslator::Close(std::string* json) {
  *json += stack_.back() == '{' ? '}' : ']';
  stack_.pop_back();
  first_ = false;
  state_ = stack_.empty() ? State::kDone : State::kAfter;
}

GemmaArgsTranslator::Step GemmaArgsTranslator::Value(char c, std::string* json) {
  if (IsSpace(c)) return Step::kMore;
  if (c == '{' || c == '[') {
    if (stack_.size() >= kMaxDepth) return Fail();
    stack_.push_back(c);
    *json += c;
    first_ = true;
    state_ = c == '{' ? State::kKey : State::kValue;
    return Step::kMore;
  }
  if (c == ']' && first_ && !stack_.empty() && stack_.back() == '[') {
    Close(json);
    return Step::kMore;
  }
  first_ = false;
  string_is_key_ = false;
  if (c == kGemmaQuote[0]) {
    mark_ = 1;
    state_ = State::kMarkString;
    return Step::kMore;
  }
  if (c == '"') {
    *json += '"';
    escaped_ = false;
    state_ = State::kJsonString;
    return Step::kMore;
  }
  if (IsScalarByte(c)) {
    token_.assign(1, c);
    state_ = State::kScalar;
    return Step::kMore;
  }
  return Fail();
}

GemmaArgsTranslator::Step GemmaArgsTranslator::EndScalar(std::string* json) {
  if (token_ == "true" || token_ == "True") {
    *json += "true";
  } else if (token_ == "false" || token_ == "False") {
    *json += "false";
  } else if (token_ == "null" || token_ == "None") {
    *json += "null";
  } else if (IsJsonNumber(token_)) {
    *json += token_;
  } else {
    return Fail();
  }
  token_.clear();
  state_ = State::kAfter;
  return Step::kMore;
}

GemmaArgsTranslator::Step GemmaArgsTranslator::After(char c, std::string* json) {
  if (IsSpace(c)) return Step::kMore;
  const char open = stack_.back();
  if (c == ',') {
    *json += ", ";
    state_ = open == '{' ? State::kKey : State::kValue;
    return Step::kMore;
  }
  if ((c == '}' && open == '{') || (c == ']' && open == '[')) {
    Close(json);
    return state_ == State::kDone ? Step::kDone : Step::kMore;
  }
  return Fail();
}

GemmaArgsTranslator::Step GemmaArgsTranslator::Feed(char c, std::string* json) {
  switch (state_) {
    case State::kStart:
      if (IsSpace(c)) return Step::kMore;
      if (c != '{') return Fail();
      return Value(c, json);
    case State::kKey:
      if (IsSpace(c)) return Step::kMore;
      if (c == '}' && first_) {
        Close(json);
        return state_ == State::kDone ? Step::kDone : Step::kMore;
      }
      *json += '"';
      first_ = false;
      string_is_key_ = true;
      if (c == kGemmaQuote[0]) {
        mark_ = 1;
        state_ = State::kMarkString;
        return Step::kMore;
      }
      if (c == '"') {
        escaped_ = false;
        state_ = State::kJsonString;
        return Step::kMore;
      }
      if (c == ':' || c == ',' || c == '{' || c == '}' || c == '[' || c == ']') return Fail();
      token_.assign(1, c);
      state_ = State::kBareKey;
      AppendEscaped(c, json);
      return Step::kMore;
    case State::kBareKey:
      if (c == ':') {
        *json += "\": ";
        token_.clear();
        state_ = State::kValue;
        return Step::kMore;
      }
      if (IsSpace(c)) {
        *json += '"';
        token_.clear();
        state_ = State::kColon;
        return Step::kMore;
      }
      if (c == ',' || c == '{' || c == '}' || c == '[' || c == ']' || c == '"' ||
          token_.size() >= kMaxToken) {
        return Fail();
      }
      token_ += c;
      AppendEscaped(c, json);
      return Step::kMore;
    case State::kColon:
      if (IsSpace(c)) return Step::kMore;
      if (c != ':') return Fail();
      *json += ": ";
      state_ = State::kValue;
      return Step::kMore;
    case State::kValue:
      return Value(c, json);
    case State::kScalar:
      if (IsScalarByte(c)) {
        if (token_.size() >= kMaxToken) return Fail();
        token_ += c;
        return Step::kMore;
      }
      if (EndScalar(json) == Step::kError) return Step::kError;
      return After(c, json);
    case State::kMarkString:
      if (mark_ < kGemmaQuote.size()) {  // the opening mark
        if (c != kGemmaQuote[mark_]) return Fail();
        if (++mark_ == kGemmaQuote.size()) {
          if (!string_is_key_) *json += '"';
          token_.clear();
        }
        return Step::kMore;
      }
      // Content; token_ holds bytes that may begin the closing mark.
      token_ += c;
      while (!token_.empty() && !kGemmaQuote.starts_with(token_)) {
        AppendEscaped(token_.front(), json);
        token_.erase(0, 1);
      }
      if (token_.size() == kGemmaQuote.size()) {
        token_.clear();
        *json += '"';
        state_ = string_is_key_ ? State::kColon : State::kAfter;
      }
      return Step::kMore;
    case State::kJsonString:
      if (hex_ > 0) {
        const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex) return Fail();
        --hex_;
      } else if (escaped_) {
        if (std::string_view("\"\\/bfnrtu").find(c) == std::string_view::npos) return Fail();
        if (c == 'u') hex_ = 4;
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        *json += '"';
        state_ = string_is_key_ ? State::kColon : State::kAfter;
        return Step::kMore;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return Fail();
      }
      *json += c;
      return Step::kMore;
    case State::kAfter:
      return After(c, json);
    case State::kDone:
    case State::kError:
      break;
  }
  return Fail();
}

}  // namespace odmoe
