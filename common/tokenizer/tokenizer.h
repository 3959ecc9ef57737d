// Text <-> token ids, from the tokenizer stored in a GGUF file.
//
// Two model kinds (tokenizer.ggml.model):
//   "llama" - SentencePiece BPE with byte fallback (Llama, Mistral, Mixtral):
//             spaces become U+2581, a dummy-prefix space is added
//             (tokenizer.ggml.add_space_prefix, default true), pieces are
//             merged greedily by score, characters missing from the vocab
//             become <0xNN> byte tokens.
//   "gpt2"  - byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, gpt-oss...):
//             the regex pre-tokenizer tokenizer.ggml.pre names
//             (pretokenizers.h), bytes mapped to printable code points,
//             merges by rank (tokenizer.ggml.merges).
//   "gemma4" - SentencePiece-style BPE (Gemma 4): spaces become U+2581, merges
//             by rank over UTF-8 characters (no byte alphabet), only newline
//             runs split apart, <0xNN> byte tokens for what no token spells;
//             no dummy prefix, BOS always.
//
//   ODMOE_ASSIGN_OR_RETURN(auto tok, Tokenizer::FromGguf(*file));
//   ODMOE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->Encode("Hello world"));
//   std::string text = tok->Decode(ids);
//
//   IncrementalDecoder dec(*tok);               // for streaming output
//   for (int32_t id : generated) std::cout << dec.Push(id);
//   std::cout << dec.Flush();
//
// Invalid UTF-8 in the input text is an INVALID_ARGUMENT error naming the byte
// offset (Encode never reads out of bounds and never crashes on any input);
// so is a text over 256 MiB.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

class GgufFile;

/// Token types as stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerModel {
  kSentencePiece,     // "llama"
  kGpt2,              // "gpt2"
  kSentencePieceBpe,  // "gemma4"
};

/// Everything the tokenizer needs, as read from GGUF metadata.
struct TokenizerVocab {
  TokenizerModel model = TokenizerModel::kSentencePiece;
  std::vector<std::string> tokens;
  std::vector<float> scores;           // SentencePiece: merge priority (higher first)
  std::vector<TokenType> token_types;  // empty = all normal
  std::vector<std::string> merges;     // BPE by rank: "left right", highest priority first
  std::string pre;                     // byte-level BPE pre-tokenizer ("" = "default")
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece dummy prefix
};

/// Reads and validates the tokenizer.ggml.* keys (ids in range, arrays of equal
/// length, known model name). INVALID_ARGUMENT naming the key otherwise.
/// Absent keys keep the defaults above, except add_bos_token, which defaults
/// to false for "gpt2" (as in llama.cpp); an id stored as -1 means "none";
/// add_bos_token = true without a bos_token_id is an error.
absl::StatusOr<TokenizerVocab> ReadTokenizerVocab(const GgufFile& file);

/// The checks ReadTokenizerVocab and Tokenizer::Create make: at least one
/// token; scores / token_types empty or one per token, scores finite, types
/// 1..6; special ids -1 or in range;
/// SentencePiece byte tokens spelled <0xNN>; byte-level BPE: a pre-tokenizer
/// name from the table in pretokenizers.h (or empty), and every merge "left right" with left, right
/// and left+right in the vocab. Errors name the GGUF key (and index).
absl::Status ValidateTokenizerVocab(const TokenizerVocab& vocab);

class Tokenizer {
 public:
  struct EncodeOptions {
    bool add_bos = true;         // prepend BOS when the vocab asks for it (add_bos)
    bool add_eos = false;        // append EOS (only if the vocab has one); it is also
                                 // appended when add_bos is set and the vocab has add_eos
    bool parse_special = false;  // recognise control/user-defined token texts like "</s>"
  };

  virtual ~Tokenizer() = default;

  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(TokenizerVocab vocab);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);

  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      const EncodeOptions& options) const = 0;
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const {
    return Encode(text, EncodeOptions{});
  }

  /// Raw bytes of one token as it appears in decoded text (may be part of a
  /// UTF-8 sequence, e.g. a byte token). Control tokens give "". An id out of
  /// range gives "".
  virtual std::string TokenToPiece(int32_t id) const = 0;

  /// Decodes a whole sequence (control tokens and ids out of range skipped;
  /// the dummy-prefix space of the first other token removed; each byte that
  /// is not part of valid UTF-8 replaced by one U+FFFD, as SentencePiece does).
  /// SentencePiece unknown tokens decode as " \u2047 " like SentencePiece.
  std::string Decode(std::span<const int32_t> ids) const;

  const TokenizerVocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  bool IsControl(int32_t id) const;
  /// The id of an exact token text, or -1.
  int32_t TokenId(std::string_view text) const;
  /// Unique among the tokenizers this process has made (never reused), so a
  /// cache of what is derived from a tokenizer (grammar/vocab_trie.h) can key
  /// on it instead of on an address that a later tokenizer may take.
  uint64_t instance_id() const { return instance_id_; }

 protected:
  explicit Tokenizer(TokenizerVocab vocab);

  /// The bytes of `id` when it is the first decoded token (SentencePiece
  /// removes the dummy-prefix space there).
  virtual std::string LeadingTokenToPiece(int32_t id) const { return TokenToPiece(id); }
  /// Ids Decode skips without output: control tokens and ids out of range.
  bool IsSkippedInDecode(int32_t id) const { return id < 0 || id >= n_vocab() || IsControl(id); }

  TokenizerVocab vocab_;
  std::unordered_map<std::string, int32_t> token_to_id_;  // first id wins on duplicates
  uint64_t instance_id_;

 private:
  friend class IncrementalDecoder;
};

/// Streaming detokenizer: Push() returns the text that became complete with
/// this token, never splitting a UTF-8 sequence across calls. Flush() returns
/// what is left (incomplete sequences as U+FFFD). The concatenation of all
/// returned strings equals Tokenizer::Decode of the same ids. Pushing after
/// Flush() continues the same text (no new dummy-prefix removal).
///
/// `continues_text`: the ids continue text the caller already has (a
/// completion after its prompt), so the first piece keeps its leading space
/// ("is" + " a man"); false decodes from the start of a text, as Decode does.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool continues_text = false);
  std::string Push(int32_t id);
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
  bool first_piece_ = true;
};

}  // namespace odmoe
