// Finds the texts of special tokens (e.g. "<s>", "</s>", "<|endoftext|>")
// inside input text, so that they become their own ids and the text between
// them is tokenised separately.
//
//   SpecialTokenMatcher m(vocab, /*include_control=*/true);
//   for (const TextFragment& f : m.Split("a</s>b")) {
//     if (f.token >= 0) emit(f.token); else encode(f.text);   // "a", </s>, "b"
//   }
//
// User-defined tokens are always matched; control and unknown tokens only when
// `include_control` (EncodeOptions::parse_special). Matching scans left to
// right and takes the longest token text starting at each position.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace odmoe {

struct TextFragment {
  std::string_view text;  // the raw text, or the token's text when token >= 0
  int32_t token = -1;     // id of a matched special token, or -1 for raw text
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher(const TokenizerVocab& vocab, bool include_control);

  /// Consecutive fragments covering `text`; raw fragments are never empty.
  std::vector<TextFragment> Split(std::string_view text) const;

  bool empty() const { return count_ == 0; }

 private:
  const TokenizerVocab* vocab_;
  // Candidate ids by first byte of their text, longest text first.
  std::array<std::vector<int32_t>, 256> by_first_byte_;
  size_t count_ = 0;
};

}  // namespace odmoe
