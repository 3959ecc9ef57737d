#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace odmoe {

SpecialTokenMatcher::SpecialTokenMatcher(const TokenizerVocab& vocab, bool include_control)
    : vocab_(&vocab) {
  for (size_t id = 0; id < vocab.token_types.size() && id < vocab.tokens.size(); ++id) {
    const TokenType type = vocab.token_types[id];
    const bool special =
        type == TokenType::kUserDefined ||
        (include_control && (type == TokenType::kControl || type == TokenType::kUnknown));
    if (!special || vocab.tokens[id].empty()) continue;
    by_first_byte_[static_cast<uint8_t>(vocab.tokens[id][0])].push_back(static_cast<int32_t>(id));
    ++count_;
  }
  for (auto& ids : by_first_byte_) {
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return vocab.tokens[a].size() > vocab.tokens[b].size();
    });
  }
}

std::vector<TextFragment> SpecialTokenMatcher::Split(std::string_view text) const {
  std::vector<TextFragment> out;
  size_t raw_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t found = -1;
    if (count_ > 0) {
      for (int32_t id : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
        if (text.substr(pos).starts_with(vocab_->tokens[id])) {
          found = id;
          break;
        }
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    if (pos > raw_start) out.push_back({text.substr(raw_start, pos - raw_start)});
    out.push_back({vocab_->tokens[found], found});
    pos += vocab_->tokens[found].size();
    raw_start = pos;
  }
  if (raw_start < text.size()) out.push_back({text.substr(raw_start)});
  return out;
}

}  // namespace odmoe
