// Internal: the three tokenizer models behind Tokenizer::Create, and the
// encoding steps they share (UTF-8 check, BOS/EOS, special-token splitting).
//
//   ODMOE_ASSIGN_OR_RETURN(auto tok, CreateSentencePieceTokenizer(std::move(vocab)));
//
// Both factories expect a vocab that passed ValidateTokenizerVocab.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "tokenizer/bpe_merger.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceTokenizer(TokenizerVocab vocab);
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateGpt2Tokenizer(TokenizerVocab vocab);
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSentencePieceBpeTokenizer(TokenizerVocab vocab);

/// Encodes one run of plain text (no special tokens in it). `at_start` is true
/// for the first fragment and for a fragment right after a special token.
using RawTextEncoder = absl::FunctionRef<absl::Status(std::string_view text, bool at_start,
                                                      std::vector<int32_t>* out)>;

/// What the two rank-merging BPE models ("gpt2", "gemma4") share: the
/// pre-tokenizer the vocab names, the special-token matchers, the merge ranks,
/// and Encode: each run of plain text through Prepare (the model's rewrite:
/// none, or spaces to U+2581), cut by the pre-tokenizer, each piece through
/// EncodeWord.
class RankedBpeTokenizer : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options) const override;

 protected:
  RankedBpeTokenizer(TokenizerVocab vocab, std::unique_ptr<PreTokenizer> pre_tokenizer);
  ~RankedBpeTokenizer() override;
  virtual std::string Prepare(std::string_view text) const { return std::string(text); }
  virtual absl::Status EncodeWord(std::string_view word, std::vector<int32_t>* out) const = 0;

  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // from vocab.pre
  SpecialTokenMatcher plain_matcher_;
  SpecialTokenMatcher special_matcher_;
  BpeMergeRanks merge_ranks_;  // validated merges
};

/// The shared Encode: rejects invalid UTF-8 (INVALID_ARGUMENT with the byte
/// offset), adds BOS / EOS per `options` and the vocab, and splits around the
/// special tokens `matcher` finds.
absl::StatusOr<std::vector<int32_t>> EncodeWithSpecialTokens(
    const TokenizerVocab& vocab, const SpecialTokenMatcher& matcher, std::string_view text,
    const Tokenizer::EncodeOptions& options, RawTextEncoder encode_raw);

}  // namespace odmoe
