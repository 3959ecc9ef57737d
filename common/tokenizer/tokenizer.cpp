#include "tokenizer/tokenizer.h"

#include <atomic>
#include <utility>

#include "absl/status/status.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer_models.h"
#include "tokenizer/utf8.h"
#include "util/status_macros.h"

namespace odmoe {

Tokenizer::Tokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {
  static std::atomic<uint64_t> next_instance{1};
  instance_id_ = next_instance.fetch_add(1, std::memory_order_relaxed);
  token_to_id_.reserve(vocab_.tokens.size());
  for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
    token_to_id_.emplace(vocab_.tokens[i], static_cast<int32_t>(i));
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(TokenizerVocab vocab) {
  ODMOE_RETURN_IF_ERROR(ValidateTokenizerVocab(vocab));
  switch (vocab.model) {
    case TokenizerModel::kSentencePiece:
      return CreateSentencePieceTokenizer(std::move(vocab));
    case TokenizerModel::kGpt2:
      return CreateGpt2Tokenizer(std::move(vocab));
    case TokenizerModel::kSentencePieceBpe:
      return CreateSentencePieceBpeTokenizer(std::move(vocab));
  }
  return absl::InvalidArgumentError("unknown tokenizer model");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  ODMOE_ASSIGN_OR_RETURN(TokenizerVocab vocab, ReadTokenizerVocab(file));
  return Create(std::move(vocab));
}

bool Tokenizer::IsControl(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.token_types.size()) return false;
  return vocab_.token_types[id] == TokenType::kControl;
}

int32_t Tokenizer::TokenId(std::string_view text) const {
  const auto it = token_to_id_.find(std::string(text));
  return it == token_to_id_.end() ? -1 : it->second;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  bool leading = true;
  for (int32_t id : ids) {
    if (IsSkippedInDecode(id)) continue;
    bytes += leading ? LeadingTokenToPiece(id) : TokenToPiece(id);
    leading = false;
  }
  std::string text;
  AppendSanitizedUtf8(bytes, /*final=*/true, &text);
  return text;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool continues_text)
    : tokenizer_(tokenizer), first_piece_(!continues_text) {}

std::string IncrementalDecoder::Push(int32_t id) {
  if (tokenizer_.IsSkippedInDecode(id)) return "";
  pending_ += first_piece_ ? tokenizer_.LeadingTokenToPiece(id) : tokenizer_.TokenToPiece(id);
  first_piece_ = false;
  std::string out;
  pending_.erase(0, AppendSanitizedUtf8(pending_, /*final=*/false, &out));
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::string out;
  AppendSanitizedUtf8(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

RankedBpeTokenizer::RankedBpeTokenizer(TokenizerVocab vocab,
                                       std::unique_ptr<PreTokenizer> pre_tokenizer)
    : Tokenizer(std::move(vocab)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      plain_matcher_(vocab_, /*include_control=*/false),
      special_matcher_(vocab_, /*include_control=*/true),
      merge_ranks_(vocab_.merges) {}

RankedBpeTokenizer::~RankedBpeTokenizer() = default;

absl::StatusOr<std::vector<int32_t>> RankedBpeTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  const SpecialTokenMatcher& m = options.parse_special ? special_matcher_ : plain_matcher_;
  return EncodeWithSpecialTokens(vocab_, m, text, options,
                                 [this](std::string_view t, bool, std::vector<int32_t>* out) {
                                   const std::string prepared = Prepare(t);
                                   ODMOE_ASSIGN_OR_RETURN(std::vector<std::string_view> words,
                                                          pre_tokenizer_->Split(prepared));
                                   for (std::string_view word : words)
                                     ODMOE_RETURN_IF_ERROR(EncodeWord(word, out));
                                   return absl::OkStatus();
                                 });
}

// Symbol indices in the merge loop are int32_t; spaces grow to 3 bytes.
constexpr size_t kMaxEncodeBytes = size_t{1} << 28;

absl::StatusOr<std::vector<int32_t>> EncodeWithSpecialTokens(
    const TokenizerVocab& vocab, const SpecialTokenMatcher& matcher, std::string_view text,
    const Tokenizer::EncodeOptions& options, RawTextEncoder encode_raw) {
  if (text.size() > kMaxEncodeBytes) {
    return absl::InvalidArgumentError(
        "text to tokenize is too long: " + std::to_string(text.size()) + " bytes (at most " +
        std::to_string(kMaxEncodeBytes) + ")");
  }
  if (std::optional<size_t> bad = FindInvalidUtf8(text)) {
    return absl::InvalidArgumentError("text to tokenize is not valid UTF-8: bad byte at offset " +
                                      std::to_string(*bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_bos && vocab.add_bos && vocab.bos_id >= 0) ids.push_back(vocab.bos_id);
  bool at_start = true;
  for (const TextFragment& f : matcher.Split(text)) {
    if (f.token >= 0) {
      ids.push_back(f.token);
    } else {
      ODMOE_RETURN_IF_ERROR(encode_raw(f.text, at_start, &ids));
    }
    at_start = f.token >= 0;
  }
  const bool eos = options.add_eos || (options.add_bos && vocab.add_eos);
  if (eos && vocab.eos_id >= 0) ids.push_back(vocab.eos_id);
  return ids;
}

}  // namespace odmoe
