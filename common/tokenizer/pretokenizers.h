// Byte-level BPE pre-tokenizers: the table from a `tokenizer.ggml.pre` name to
// the regex splits that model's tokenizer.json applies before BPE, run by
// PCRE2 (UTF mode, Unicode properties, JIT where the platform has it).
//
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> pre, PreTokenizer::Create("qwen2"));
//   ODMOE_ASSIGN_OR_RETURN(std::vector<std::string_view> pieces, pre->Split("Hello 123"));
//   // {"Hello", " ", "1", "2", "3"}
//
// A pre-tokenizer is an ordered list of patterns. Each pattern is applied, in
// order, to every piece the previous one left (the first to the whole text),
// like Hugging Face's Split(pattern, behavior="isolated"): every match becomes
// a piece and so does every non-empty stretch between matches. Concatenating
// the pieces gives the input back, and no piece is empty.
//
// Supported names (and the models that carry them):
//   "default", "gpt-2", "olmo", "mpt"   the GPT-2 regex (GPT-2, GPT-NeoX, OLMo, OLMoE, MPT)
//   "starcoder"                         single digits, then the GPT-2 regex
//   "llama-bpe", "dbrx", "smaug-bpe"    Llama 3's regex (cl100k: 1-3 digit numbers)
//   "qwen2", "deepseek-r1-qwen"         Qwen2 / Qwen3 (single digits)
//   "gpt-4o", "llama4"                  o200k (gpt-oss, Llama 4)
//   "tekken"                            Mistral's tekken
//   "deepseek-llm", "deepseek-coder"    DeepSeek LLM / V2 / Coder (five / four splits, single
//   digits) "deepseek-v3"                       DeepSeek V3 / R1 (three splits)
// An empty name means "default".
//
// Exactness: the patterns are the tokenizer.json ones; the golden test
// (tests/data/pretokenizer_splits.json, written by Hugging Face tokenizers)
// checks every name piece by piece. Two dialect differences are bridged:
// Hugging Face's (Oniguruma's) \s is exactly Unicode White_Space, while
// PCRE2's \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR), so \s and \S
// are rewritten to the explicit White_Space list (ToPcre2Pattern); and the
// Unicode tables are PCRE2's (Unicode 14 for PCRE2 10.42), so letters and
// digits assigned after that are classed as unassigned.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

class PreTokenizer {
 public:
  /// Compiles the table entry `name` (INVALID_ARGUMENT naming the value and
  /// every supported name when there is none).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view name);

  /// True when Create(name) finds a table entry ("" counts as "default").
  static bool IsSupported(std::string_view name);

  /// True when a vocabulary with this pre-tokenizer prepends BOS unless its
  /// tokenizer.ggml.add_bos_token says otherwise (Llama 3's "llama-bpe",
  /// Mistral's "tekken"; every other byte-level vocabulary: only if it says so).
  static bool AddsBosByDefault(std::string_view name);

  /// The supported names, quoted and comma-separated, for error messages.
  static std::string SupportedNames();

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  /// The table name this was created from.
  const std::string& name() const { return name_; }
  /// A pre-token that is one token of the vocabulary is encoded as that
  /// token, without merges (Hugging Face's BPE `ignore_merges`: Llama 3's
  /// "llama-bpe"), where merging could split it ("Cửa Việt").
  bool ignore_merges() const { return ignore_merges_; }

  /// Splits `text` into consecutive non-empty views of it that cover it.
  /// Invalid UTF-8 is INVALID_ARGUMENT with the byte offset (nothing reaches
  /// PCRE2 unchecked); a PCRE2 match failure (a resource limit) is INTERNAL.
  /// Thread-safe: one PreTokenizer may split on several threads at once.
  absl::StatusOr<std::vector<std::string_view>> Split(std::string_view text) const;

 private:
  struct CompiledPattern;
  PreTokenizer(std::string name, std::vector<std::unique_ptr<CompiledPattern>> patterns,
               bool ignore_merges);

  std::string name_;
  std::vector<std::unique_ptr<CompiledPattern>> patterns_;
  bool ignore_merges_ = false;
};

/// Rewrites a tokenizer.json (Oniguruma) pattern for PCRE2: \s becomes the
/// Unicode White_Space list (a bracketed class, or its members inside a class)
/// and \S outside a class its complement. INVALID_ARGUMENT for \S inside a
/// class (no table pattern has one). Exposed for the tests.
absl::StatusOr<std::string> ToPcre2Pattern(std::string_view pattern);

}  // namespace odmoe
