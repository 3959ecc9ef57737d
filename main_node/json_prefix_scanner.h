// A byte-at-a-time JSON syntax checker: it says, after each byte, whether the
// bytes so far are still the start of one JSON value (RFC 8259), whether the
// value just ended, or where it went wrong. The tool-call parser streams a
// call's arguments through it, so that a fragment leaves only once it is
// known to be a valid prefix, and knows where the arguments end without a
// second parse. It keeps no text: memory is the nesting depth (at most
// kJsonScannerMaxDepth, deeper is an error).
//
//   JsonPrefixScanner scan;
//   for (char c : std::string_view(R"({"a": [1, 2]} tail)")) {
//     JsonScanStep step = scan.Feed(c);
//     if (step == JsonScanStep::kDone) break;         // after the '}'
//     if (step == JsonScanStep::kError) return ...;   // not JSON
//   }
//
// A top-level number has no closing byte: the scanner reports kDoneBefore on
// the first byte after it (that byte is not part of the value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace odmoe {

inline constexpr size_t kJsonScannerMaxDepth = 128;

enum class JsonScanStep {
  kMore,        // a valid prefix; the value goes on
  kDone,        // this byte ended the value
  kDoneBefore,  // the value ended before this byte (a top-level number)
  kError,       // this byte makes the text not JSON
};

class JsonPrefixScanner {
 public:
  /// Leading whitespace is skipped; after kDone/kDoneBefore/kError every
  /// byte is kError.
  JsonScanStep Feed(char c);
  /// True when the bytes so far are a complete value: a top-level number
  /// that may still go on ("12"), or after kDone.
  bool Complete() const;
  /// The first non-whitespace byte (0 before it): '{' for an object.
  char first() const { return first_; }

 private:
  enum class State : uint8_t {
    kValue,       // a value must come (leading whitespace allowed)
    kKeyOrClose,  // after '{'
    kKey,         // after ','  in an object
    kColon,
    kCommaOrClose,  // after a value inside a container
    kValueOrClose,  // after '['
    kString,
    kEscape,
    kHex,  // hex_left_ digits of \uXXXX to go
    kNumber,
    kLiteral,  // literal_ + literal_pos_
    kEnd,
    kFailed,
  };
  enum class Num : uint8_t { kSign, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };

  JsonScanStep Step(char c);
  JsonScanStep ValueEnded();
  JsonScanStep StartValue(char c);
  JsonScanStep AfterValue(char c);

  State state_ = State::kValue;
  std::vector<char> stack_;  // '{' or '['
  bool string_is_key_ = false;
  Num num_ = Num::kSign;
  const char* literal_ = nullptr;
  uint8_t literal_pos_ = 0;
  uint8_t hex_left_ = 0;
  char first_ = 0;
};

}  // namespace odmoe
