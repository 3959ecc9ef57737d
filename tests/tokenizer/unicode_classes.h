// Test oracle data: Unicode character classes used by the former hand-written
// GPT-2 pre-tokenizer (gpt2_pretokenizer_oracle.h) for the regex
// ('s|'t|... ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+).
//
//   if (ClassifyCodepoint(U'é') == CodepointClass::kLetter) { ... }
//
// The table behind it (unicode_classes.cpp) is generated data: general
// categories L* and N* from Python's unicodedata and the White_Space list.
#pragma once

#include <cstdint>

namespace odmoe::test {

enum class CodepointClass : uint8_t {
  kOther,       // neither letter, number nor whitespace (punctuation, symbols, marks...)
  kLetter,      // \p{L}
  kNumber,      // \p{N}
  kWhitespace,  // \s (Unicode White_Space)
};

/// Class of one code point (binary search over about 1,000 ranges).
CodepointClass ClassifyCodepoint(char32_t cp);

}  // namespace odmoe::test
