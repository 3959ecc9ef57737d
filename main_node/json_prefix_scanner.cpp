#include "main_node/json_prefix_scanner.h"

#include <cstring>

namespace odmoe {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

bool JsonPrefixScanner::Complete() const {
  if (state_ == State::kEnd) return true;
  return state_ == State::kNumber && stack_.empty() &&
         (num_ == Num::kZero || num_ == Num::kInt || num_ == Num::kFrac || num_ == Num::kExpDigits);
}

JsonScanStep JsonPrefixScanner::ValueEnded() {
  if (stack_.empty()) {
    state_ = State::kEnd;
    return JsonScanStep::kDone;
  }
  state_ = State::kCommaOrClose;
  return JsonScanStep::kMore;
}

JsonScanStep JsonPrefixScanner::StartValue(char c) {
  if (first_ == 0) first_ = c;
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kJsonScannerMaxDepth) return JsonScanStep::kError;
      stack_.push_back(c);
      state_ = c == '{' ? State::kKeyOrClose : State::kValueOrClose;
      return JsonScanStep::kMore;
    case '"':
      string_is_key_ = false;
      state_ = State::kString;
      return JsonScanStep::kMore;
    case 't':
      literal_ = "true";
      break;
    case 'f':
      literal_ = "false";
      break;
    case 'n':
      literal_ = "null";
      break;
    default:
      if (c == '-' || IsDigit(c)) {
        state_ = State::kNumber;
        num_ = c == '-' ? Num::kSign : c == '0' ? Num::kZero : Num::kInt;
        return JsonScanStep::kMore;
      }
      return JsonScanStep::kError;
  }
  state_ = State::kLiteral;
  literal_pos_ = 1;
  return JsonScanStep::kMore;
}

// `c` follows a complete value inside a container.
JsonScanStep JsonPrefixScanner::AfterValue(char c) {
  if (IsSpace(c)) return JsonScanStep::kMore;
  const char open = stack_.back();
  if (c == ',') {
    state_ = open == '{' ? State::kKey : State::kValue;
    return JsonScanStep::kMore;
  }
  if ((open == '{' && c == '}') || (open == '[' && c == ']')) {
    stack_.pop_back();
    return ValueEnded();
  }
  return JsonScanStep::kError;
}

JsonScanStep JsonPrefixScanner::Feed(char c) {
  const JsonScanStep step = Step(c);
  if (step == JsonScanStep::kError) state_ = State::kFailed;
  return step;
}

JsonScanStep JsonPrefixScanner::Step(char c) {
  switch (state_) {
    case State::kValue:
      if (IsSpace(c)) return JsonScanStep::kMore;
      return StartValue(c);
    case State::kValueOrClose:
      if (IsSpace(c)) return JsonScanStep::kMore;
      if (c == ']') {
        stack_.pop_back();
        return ValueEnded();
      }
      return StartValue(c);
    case State::kKeyOrClose:
    case State::kKey:
      if (IsSpace(c)) return JsonScanStep::kMore;
      if (c == '}' && state_ == State::kKeyOrClose) {
        stack_.pop_back();
        return ValueEnded();
      }
      if (c != '"') return JsonScanStep::kError;
      string_is_key_ = true;
      state_ = State::kString;
      return JsonScanStep::kMore;
    case State::kColon:
      if (IsSpace(c)) return JsonScanStep::kMore;
      if (c != ':') return JsonScanStep::kError;
      state_ = State::kValue;
      return JsonScanStep::kMore;
    case State::kCommaOrClose:
      return AfterValue(c);
    case State::kString:
      if (c == '"') {
        if (string_is_key_) {
          state_ = State::kColon;
          return JsonScanStep::kMore;
        }
        return ValueEnded();
      }
      if (c == '\\') state_ = State::kEscape;
      if (static_cast<unsigned char>(c) < 0x20) return JsonScanStep::kError;
      return JsonScanStep::kMore;
    case State::kEscape:
      if (c == 'u') {
        state_ = State::kHex;
        hex_left_ = 4;
        return JsonScanStep::kMore;
      }
      if (std::strchr("\"\\/bfnrt", c) == nullptr || c == 0) return JsonScanStep::kError;
      state_ = State::kString;
      return JsonScanStep::kMore;
    case State::kHex:
      if (!IsHex(c)) return JsonScanStep::kError;
      if (--hex_left_ == 0) state_ = State::kString;
      return JsonScanStep::kMore;
    case State::kLiteral:
      if (c != literal_[literal_pos_]) return JsonScanStep::kError;
      if (literal_[++literal_pos_] == 0) return ValueEnded();
      return JsonScanStep::kMore;
    case State::kNumber: {
      const bool digit = IsDigit(c);
      switch (num_) {
        case Num::kSign:
          if (!digit) return JsonScanStep::kError;
          num_ = c == '0' ? Num::kZero : Num::kInt;
          return JsonScanStep::kMore;
        case Num::kInt:
          if (digit) return JsonScanStep::kMore;
          [[fallthrough]];
        case Num::kZero:
          if (c == '.') {
            num_ = Num::kDot;
            return JsonScanStep::kMore;
          }
          if (c == 'e' || c == 'E') {
            num_ = Num::kExp;
            return JsonScanStep::kMore;
          }
          break;
        case Num::kDot:
          if (!digit) return JsonScanStep::kError;
          num_ = Num::kFrac;
          return JsonScanStep::kMore;
        case Num::kFrac:
          if (digit) return JsonScanStep::kMore;
          if (c == 'e' || c == 'E') {
            num_ = Num::kExp;
            return JsonScanStep::kMore;
          }
          break;
        case Num::kExp:
          if (c == '+' || c == '-') {
            num_ = Num::kExpSign;
            return JsonScanStep::kMore;
          }
          [[fallthrough]];
        case Num::kExpSign:
          if (!digit) return JsonScanStep::kError;
          num_ = Num::kExpDigits;
          return JsonScanStep::kMore;
        case Num::kExpDigits:
          if (digit) return JsonScanStep::kMore;
          break;
      }
      // The number ended before `c`.
      if (stack_.empty()) {
        state_ = State::kEnd;
        return JsonScanStep::kDoneBefore;
      }
      state_ = State::kCommaOrClose;
      return AfterValue(c);
    }
    case State::kEnd:
    case State::kFailed:
      return JsonScanStep::kError;
  }
  return JsonScanStep::kError;
}

}  // namespace odmoe
