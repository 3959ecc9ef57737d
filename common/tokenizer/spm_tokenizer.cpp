// SentencePiece BPE ("llama") encoding and decoding.
#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/tokenizer_models.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";       // U+2581
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";  // " U+2047 "

// A digit of a validated "<0xNN>" byte token.
int HexValue(char c) { return c <= '9' ? c - '0' : c - 'A' + 10; }

// The piece text with every U+2581 turned back into a space.
std::string ReplaceSpaceSymbols(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos).starts_with(kSpaceSymbol)) {
      out.push_back(' ');
      pos += kSpaceSymbol.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(TokenizerVocab vocab)
      : Tokenizer(std::move(vocab)),
        plain_matcher_(vocab_, /*include_control=*/false),
        special_matcher_(vocab_, /*include_control=*/true) {
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
      const TokenType t = Type(static_cast<int32_t>(i));
      // What SentencePiece may merge into: normal, user-defined, unused pieces.
      if (t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused) {
        mergeable_.emplace(vocab_.tokens[i], static_cast<int32_t>(i));
      }
    }
    for (int b = 0; b < 256; ++b) byte_tokens_[b] = TokenId(absl::StrFormat("<0x%02X>", b));
  }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options) const override {
    const SpecialTokenMatcher& m = options.parse_special ? special_matcher_ : plain_matcher_;
    return EncodeWithSpecialTokens(
        vocab_, m, text, options,
        [this](std::string_view t, bool at_start, std::vector<int32_t>* out) {
          return EncodeRaw(t, at_start, out);
        });
  }

  std::string TokenToPiece(int32_t id) const override {
    if (id < 0 || id >= n_vocab()) return "";
    const std::string& text = vocab_.tokens[id];
    switch (Type(id)) {
      case TokenType::kControl:
        return "";
      case TokenType::kUnknown:
        return std::string(kUnknownSurface);
      case TokenType::kByte:
        return std::string(1, static_cast<char>(HexValue(text[3]) * 16 + HexValue(text[4])));
      default:
        return ReplaceSpaceSymbols(text);
    }
  }

 protected:
  std::string LeadingTokenToPiece(int32_t id) const override {
    std::string piece = TokenToPiece(id);
    const TokenType t = Type(id);
    const bool text_piece = t != TokenType::kByte && t != TokenType::kUnknown;
    if (vocab_.add_space_prefix && text_piece && piece.starts_with(' ')) piece.erase(0, 1);
    return piece;
  }

 private:
  TokenType Type(int32_t id) const {
    return vocab_.token_types.empty() ? TokenType::kNormal : vocab_.token_types[id];
  }
  float Score(int32_t id) const { return vocab_.scores.empty() ? 0.0f : vocab_.scores[id]; }

  absl::Status EncodeRaw(std::string_view raw, bool at_start, std::vector<int32_t>* out) const {
    std::string text;
    text.reserve(raw.size() + raw.size() / 2 + 3);
    if (at_start && vocab_.add_space_prefix) text.append(kSpaceSymbol);
    for (char c : raw) {
      if (c == ' ') {
        text.append(kSpaceSymbol);
      } else {
        text.push_back(c);
      }
    }
    std::vector<size_t> starts;
    starts.reserve(text.size());
    for (size_t pos = 0; pos < text.size();
         pos += std::max<size_t>(1, ScanUtf8(text, pos).length)) {
      starts.push_back(pos);
    }
    const BpeMergeResult r = BpeMerge(
        text, starts, [this](std::string_view l, std::string_view r) -> std::optional<double> {
          const auto it = mergeable_.find(std::string_view(l.data(), l.size() + r.size()));
          if (it == mergeable_.end()) return std::nullopt;
          return Score(it->second);
        });
    for (int32_t node : r.final_symbols) {
      absl::Status s = EmitSymbol(r, node, out);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // A final symbol: its piece; merges into unused pieces are split again (as
  // SentencePiece does); characters without a piece become byte tokens.
  absl::Status EmitSymbol(const BpeMergeResult& r, int32_t node, std::vector<int32_t>* out) const {
    const BpeNode& n = r.nodes[node];
    const auto it = mergeable_.find(n.text);
    if (it != mergeable_.end()) {
      if (Type(it->second) == TokenType::kUnused && n.left >= 0) {
        absl::Status s = EmitSymbol(r, n.left, out);
        return s.ok() ? EmitSymbol(r, n.right, out) : s;
      }
      out->push_back(it->second);
      return absl::OkStatus();
    }
    bool have_bytes = true;
    for (char c : n.text) have_bytes = have_bytes && byte_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (have_bytes) {
      for (char c : n.text) out->push_back(byte_tokens_[static_cast<uint8_t>(c)]);
    } else if (vocab_.unk_id >= 0) {
      out->push_back(vocab_.unk_id);
    } else {
      return absl::InvalidArgumentError("no token for \"" + std::string(n.text) +
                                        "\" and the vocab has neither byte tokens nor <unk>");
    }
    return absl::OkStatus();
  }

  SpecialTokenMatcher plain_matcher_;
  SpecialTokenMatcher special_matcher_;
  std::unordered_map<std::string_view, int32_t> mergeable_;  // views into vocab_.tokens
  std::array<int32_t, 256> byte_tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceTokenizer(TokenizerVocab vocab) {
  return std::make_unique<SentencePieceTokenizer>(std::move(vocab));
}

}  // namespace odmoe
