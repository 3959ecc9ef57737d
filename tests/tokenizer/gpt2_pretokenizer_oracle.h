// Test oracle: odmoe's former hand-written GPT-2 pre-tokenizer (before the
// PCRE2 table in common/tokenizer/pretokenizers.h), kept to check that the
// "gpt-2" table entry splits exactly as it did. It splits text into the words
// that byte-level BPE then merges inside, as the GPT-2 regex
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// does (alternatives tried in order at each position, first match wins), by
// a hand-written matcher over code points (no regex engine).
//
//   std::vector<std::string_view> words = Gpt2PreTokenize("Hello  world's");
//   // {"Hello", " ", " world", "'s"}
//
// The contractions are case-sensitive ("'S" is not one), \s is Unicode
// White_Space and \p{L} / \p{N} come from unicode_classes.h.
#pragma once

#include <string_view>
#include <vector>

namespace odmoe::test {

/// Splits valid UTF-8 `text` (checked by the caller) into consecutive,
/// non-empty views into `text` that together cover it exactly.
std::vector<std::string_view> Gpt2PreTokenize(std::string_view text);

}  // namespace odmoe::test
