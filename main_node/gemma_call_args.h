// Gemma 4 writes a tool call's arguments in its own object notation (its
// chat template's format_argument): keys bare, strings between <|"|> marks,
// numbers, booleans, objects and arrays as JSON has them, no spaces:
//
//   {city:<|"|>Paris<|"|>,days:3,tags:[<|"|>a<|"|>]}
//
// GemmaArgsTranslator reads such text one byte at a time and writes the same
// value as JSON ({"city": "Paris", "days": 3, "tags": ["a"]}), each part as
// soon as it is certain, so a streamed call's argument fragments add up to
// the whole translation. It also reads what a grammar or a model may write
// instead: keys between <|"|> marks or JSON quotes, JSON strings, spaces
// between parts, and Python's True / False / None. Anything else is kError
// (the call then is not a call); nesting is bounded.
//
//   GemmaArgsTranslator t;
//   std::string json;
//   for (char c : text) if (t.Feed(c, &json) != GemmaArgsTranslator::Step::kMore) break;
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace odmoe {

/// Gemma's string mark, a token of its vocabulary.
inline constexpr std::string_view kGemmaQuote = "<|\"|>";

class GemmaArgsTranslator {
 public:
  enum class Step { kMore, kDone, kError };
  /// Deepest nesting of objects and arrays accepted.
  static constexpr size_t kMaxDepth = 64;
  /// Longest bare key or scalar accepted.
  static constexpr size_t kMaxToken = 256;

  /// Reads one byte; appends the JSON it makes certain to `json`. kDone once
  /// the outer object closed (feed no more), kError from the first byte that
  /// cannot continue the notation (and ever after).
  Step Feed(char c, std::string* json);

 private:
  enum class State {
    kStart,       // before the outer '{'
    kKey,         // an object's next key (or its '}' when it has none yet)
    kBareKey,     // a bare key, up to ':'
    kColon,       // after a quoted key
    kValue,       // a value
    kScalar,      // a number or a literal, up to a delimiter
    kMarkString,  // inside <|"|> ... <|"|>
    kJsonString,  // inside "..."
    kAfter,       // after a value: ',' or a close
    kDone,
    kError,
  };
  Step Fail();
  Step Value(char c, std::string* json);
  Step After(char c, std::string* json);
  Step EndScalar(std::string* json);
  void Close(std::string* json);

  State state_ = State::kStart;
  std::vector<char> stack_;  // '{' or '['
  bool first_ = true;        // the container has no member yet
  bool string_is_key_ = false;
  bool escaped_ = false;  // kJsonString: after a backslash
  int hex_ = 0;           // kJsonString: hex digits of a \u escape still due
  size_t mark_ = 0;       // bytes of an opening <|"|> matched so far
  std::string token_;     // a bare key, a scalar, or held bytes of a closing mark
};

}  // namespace odmoe
