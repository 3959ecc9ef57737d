// Byte-level BPE ("gpt2") encoding and decoding; the text is first split by
// the pre-tokenizer the vocab names (tokenizer.ggml.pre, pretokenizers.h).
#include <array>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer_models.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

// GPT-2's map from bytes to printable code points: bytes that are printable
// Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) map to themselves, the
// other 68 bytes to U+0100, U+0101, ... in byte order.
std::array<char32_t, 256> MakeByteToCodepoint() {
  std::array<char32_t, 256> map{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return map;
}

class Gpt2Tokenizer final : public RankedBpeTokenizer {
 public:
  Gpt2Tokenizer(TokenizerVocab vocab, std::unique_ptr<PreTokenizer> pre_tokenizer)
      : RankedBpeTokenizer(std::move(vocab), std::move(pre_tokenizer)) {
    const std::array<char32_t, 256> cps = MakeByteToCodepoint();
    for (int b = 0; b < 256; ++b) {
      AppendUtf8(cps[b], &byte_text_[b]);
      codepoint_to_byte_.emplace(cps[b], static_cast<uint8_t>(b));
    }
  }

  std::string TokenToPiece(int32_t id) const override {
    if (id < 0 || id >= n_vocab()) return "";
    const std::string& text = vocab_.tokens[id];
    const TokenType type = vocab_.token_types.empty() ? TokenType::kNormal : vocab_.token_types[id];
    if (type == TokenType::kControl) return "";
    if (type == TokenType::kUserDefined || type == TokenType::kUnknown) return text;
    std::string bytes;
    size_t pos = 0;
    while (pos < text.size()) {
      const Utf8Scan s = ScanUtf8(text, pos);
      const size_t len = s.state == Utf8State::kValid ? s.length : 1;
      const auto it = codepoint_to_byte_.find(s.codepoint);
      if (s.state == Utf8State::kValid && it != codepoint_to_byte_.end()) {
        bytes.push_back(static_cast<char>(it->second));
      } else {
        bytes.append(text, pos, len);  // not a mapped byte: kept as it is
      }
      pos += len;
    }
    return bytes;
  }

 private:
  absl::Status EncodeWord(std::string_view word, std::vector<int32_t>* out) const override {
    std::string mapped;
    std::vector<size_t> starts;
    starts.reserve(word.size());
    for (char c : word) {
      starts.push_back(mapped.size());
      mapped += byte_text_[static_cast<uint8_t>(c)];
    }
    if (pre_tokenizer_->ignore_merges()) {
      if (const auto it = token_to_id_.find(mapped); it != token_to_id_.end()) {
        out->push_back(it->second);
        return absl::OkStatus();
      }
    }
    const BpeMergeResult r = merge_ranks_.Merge(mapped, starts);
    for (int32_t node : r.final_symbols) {
      const auto it = token_to_id_.find(std::string(r.nodes[node].text));
      if (it != token_to_id_.end()) {
        out->push_back(it->second);
      } else if (vocab_.unk_id >= 0) {
        out->push_back(vocab_.unk_id);
      } else {
        return absl::InvalidArgumentError("no token for byte-level symbol \"" +
                                          std::string(r.nodes[node].text) +
                                          "\" and the vocab has no unk");
      }
    }
    return absl::OkStatus();
  }

  std::array<std::string, 256> byte_text_;
  absl::flat_hash_map<char32_t, uint8_t> codepoint_to_byte_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateGpt2Tokenizer(TokenizerVocab vocab) {
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = PreTokenizer::Create(vocab.pre);
  if (!pre.ok()) return pre.status();
  return std::make_unique<Gpt2Tokenizer>(std::move(vocab), *std::move(pre));
}

}  // namespace odmoe
