// SentencePiece-style BPE ("gemma4"): ranked merges (tokenizer.ggml.merges)
// over the text's UTF-8 characters, not over GPT-2's byte alphabet. Spaces
// become U+2581 before anything else; the text is cut only into runs of
// newlines and runs of the rest (the "gemma4" pre-tokenizer), a run of
// newlines that is itself a token stays that token; a merged symbol that is
// not a token is spelled with its bytes' <0xNN> tokens. Decoding maps U+2581
// back to a space. No dummy-prefix space, and BOS always (as Gemma's
// tokenizer and llama.cpp have it).
#include <array>
#include <string>

#include "absl/status/status.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer_models.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kEscapedSpace;
    } else {
      out += c;
    }
  }
  return out;
}

class SentencePieceBpeTokenizer final : public RankedBpeTokenizer {
 public:
  SentencePieceBpeTokenizer(TokenizerVocab vocab, std::unique_ptr<PreTokenizer> pre_tokenizer)
      : RankedBpeTokenizer(std::move(vocab), std::move(pre_tokenizer)) {
    static const char* kHex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const std::string text = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      byte_token_[b] = TokenId(text);
    }
  }

  std::string TokenToPiece(int32_t id) const override {
    if (id < 0 || id >= n_vocab()) return "";
    const std::string& text = vocab_.tokens[id];
    const TokenType type = vocab_.token_types.empty() ? TokenType::kNormal : vocab_.token_types[id];
    switch (type) {
      case TokenType::kControl:
        return "";
      case TokenType::kByte:
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      case TokenType::kNormal:
      case TokenType::kUnused: {
        std::string out;
        size_t pos = 0;
        for (size_t hit; (hit = text.find(kEscapedSpace, pos)) != std::string::npos;
             pos = hit + kEscapedSpace.size()) {
          out.append(text, pos, hit - pos).push_back(' ');
        }
        return out.append(text, pos);
      }
      default:
        return text;  // user-defined, unknown: as written
    }
  }

 private:
  std::string Prepare(std::string_view text) const override { return EscapeSpaces(text); }
  absl::Status EncodeWord(std::string_view word, std::vector<int32_t>* out) const override {
    if (word.find_first_not_of('\n') == std::string_view::npos) {
      if (const int32_t id = TokenId(word); id >= 0) {
        out->push_back(id);
        return absl::OkStatus();
      }
    }
    std::vector<size_t> starts;
    starts.reserve(word.size());
    for (size_t pos = 0; pos < word.size(); pos += ScanUtf8(word, pos).length) {
      starts.push_back(pos);
    }
    const BpeMergeResult r = merge_ranks_.Merge(word, starts);
    for (int32_t node : r.final_symbols) {
      const std::string_view symbol = r.nodes[node].text;
      if (const int32_t id = TokenId(symbol); id >= 0) {
        out->push_back(id);
        continue;
      }
      for (char c : symbol) {
        const int32_t byte = byte_token_[static_cast<uint8_t>(c)];
        if (byte >= 0) {
          out->push_back(byte);
        } else if (vocab_.unk_id >= 0) {
          out->push_back(vocab_.unk_id);
        } else {
          return absl::InvalidArgumentError("no token for \"" + std::string(symbol) +
                                            "\" nor for its bytes, and the vocab has no unk");
        }
      }
    }
    return absl::OkStatus();
  }

  std::array<int32_t, 256> byte_token_{};  // <0xNN> ids, -1 where absent
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceBpeTokenizer(TokenizerVocab vocab) {
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = PreTokenizer::Create(vocab.pre);
  if (!pre.ok()) return pre.status();
  return std::make_unique<SentencePieceBpeTokenizer>(std::move(vocab), *std::move(pre));
}

}  // namespace odmoe
