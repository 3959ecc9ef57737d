// Small hand-made vocabularies for the tokenizer tests, with expected results
// derived by hand in the tests that use them.
//
//   TestVocab v = MakeSpmTestVocab();
//   auto tok = Tokenizer::Create(v.vocab).value();
//   CHECK(tok->Encode("the").value() == std::vector<int32_t>{1, v.Id("▁the")});
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace odmoe::test {

struct TestVocab {
  TokenizerVocab vocab;
  int32_t Add(const std::string& text, float score, TokenType type) {
    vocab.tokens.push_back(text);
    vocab.scores.push_back(score);
    vocab.token_types.push_back(type);
    return static_cast<int32_t>(vocab.tokens.size()) - 1;
  }
  /// Id of a token text; throws (fails the test) when absent.
  int32_t Id(const std::string& text) const {
    for (size_t i = 0; i < vocab.tokens.size(); ++i) {
      if (vocab.tokens[i] == text) return static_cast<int32_t>(i);
    }
    throw std::runtime_error("no token " + text);
  }
};

/// SentencePiece vocab: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then
/// merged pieces (score: higher merges first) and single characters.
/// "xy" is an unused piece; "<", "s", ">" exist so "<s>" can be spelled.
inline TestVocab MakeSpmTestVocab(bool byte_tokens = true) {
  TestVocab v;
  v.vocab.model = TokenizerModel::kSentencePiece;
  v.vocab.unk_id = v.Add("<unk>", 0, TokenType::kUnknown);
  v.vocab.bos_id = v.Add("<s>", 0, TokenType::kControl);
  v.vocab.eos_id = v.Add("</s>", 0, TokenType::kControl);
  if (byte_tokens) {
    const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      v.Add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::kByte);
    }
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\u2581t", -1}, {"he", -2},           {"\u2581the", -3}, {"aa", -4},       {"bc", -5},
      {"ab", -6},      {"\u2581\u2581", -7}, {"yz", -2.5f},     {"\u2581", -100}, {"t", -101},
      {"h", -102},     {"e", -103},          {"a", -104},       {"b", -105},      {"c", -106},
      {"<", -107},     {"s", -108},          {">", -109},       {"x", -110},      {"y", -111},
      {"z", -112},     {"\u4e2d", -113}};
  for (const auto& [text, score] : pieces) v.Add(text, score, TokenType::kNormal);
  v.Add("xy", -0.5f, TokenType::kUnused);
  return v;
}

/// GPT-2's printable code point for each byte (the rule, restated here so the
/// tests do not depend on the implementation's table).
inline std::string Gpt2ByteText(int b) {
  int extra = 0;
  for (int c = 0; c < b; ++c) {
    const bool printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
    if (!printable) ++extra;
  }
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  std::string s;
  AppendUtf8(printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra), &s);
  return s;
}

/// GPT-2 vocab: ids 0..255 are the bytes 0..255, then the results of the
/// merges below (in rank order), then "<|endoftext|>" (control).
inline TestVocab MakeGpt2TestVocab() {
  TestVocab v;
  v.vocab.model = TokenizerModel::kGpt2;
  v.vocab.pre = "gpt-2";
  v.vocab.add_bos = false;
  v.vocab.scores.clear();
  for (int b = 0; b < 256; ++b) v.Add(Gpt2ByteText(b), 0, TokenType::kNormal);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"},   {"l", "l"},
      {"e", "ll"},     {"'", "s"}, {"\u010a", "\u010a"}};
  for (const auto& [l, r] : merges) {
    v.vocab.merges.push_back(l + " " + r);
    v.Add(l + r, 0, TokenType::kNormal);
  }
  const int32_t eot = v.Add("<|endoftext|>", 0, TokenType::kControl);
  v.vocab.bos_id = eot;
  v.vocab.eos_id = eot;
  v.vocab.scores.clear();
  return v;
}

}  // namespace odmoe::test
