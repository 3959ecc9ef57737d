// ReadTokenizerVocab and ValidateTokenizerVocab.
#include <cmath>
#include <string>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kBosKey = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kEosKey = "tokenizer.ggml.eos_token_id";
constexpr std::string_view kUnkKey = "tokenizer.ggml.unknown_token_id";
constexpr std::string_view kPadKey = "tokenizer.ggml.padding_token_id";
constexpr std::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpaceKey = "tokenizer.ggml.add_space_prefix";

absl::Status KeyError(std::string_view key, std::string_view what) {
  return absl::InvalidArgumentError(std::string(key) + ": " + std::string(what));
}

std::string Indexed(std::string_view key, size_t i) {
  return std::string(key) + "[" + std::to_string(i) + "]";
}

absl::StatusOr<std::vector<std::string>> ReadStrings(const GgufFile& f, std::string_view key,
                                                     bool required) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    if (required) return KeyError(key, "missing");
    return std::vector<std::string>{};
  }
  const std::vector<std::string>* a = v->AsStringArray();
  if (a == nullptr) return KeyError(key, "expected an array of strings");
  return *a;
}

absl::Status ReadId(const GgufFile& f, std::string_view key, int32_t* id) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return absl::OkStatus();
  const std::optional<int64_t> i = v->AsInt();
  if (v->type() == GgufType::kArray || !i.has_value()) return KeyError(key, "expected an integer");
  if (*i < -1 || *i > INT32_MAX) return KeyError(key, absl::StrCat("id ", *i, " out of range"));
  *id = static_cast<int32_t>(*i);
  return absl::OkStatus();
}

absl::Status ReadBool(const GgufFile& f, std::string_view key, bool* out) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return absl::OkStatus();
  const std::optional<bool> b = v->AsBool();
  if (!b.has_value()) return KeyError(key, "expected a bool");
  *out = *b;
  return absl::OkStatus();
}

absl::Status ReadArrays(const GgufFile& f, TokenizerVocab* vocab) {
  ODMOE_ASSIGN_OR_RETURN(vocab->tokens, ReadStrings(f, kTokensKey, /*required=*/true));
  if (const GgufValue* v = f.Find(kScoresKey)) {
    std::optional<std::vector<float>> scores = v->AsF32Array();
    if (!scores.has_value()) return KeyError(kScoresKey, "expected a numeric array");
    vocab->scores = std::move(*scores);
  }
  if (const GgufValue* v = f.Find(kTypesKey)) {
    std::optional<std::vector<int32_t>> types = v->AsI32Array();
    if (!types.has_value()) return KeyError(kTypesKey, "expected an array of int32");
    vocab->token_types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int32_t t = (*types)[i];
      if (t < 1 || t > 6) return KeyError(Indexed(kTypesKey, i), absl::StrCat(t, " not in 1..6"));
      vocab->token_types.push_back(static_cast<TokenType>(t));
    }
  }
  const bool ranked = vocab->model != TokenizerModel::kSentencePiece;
  ODMOE_ASSIGN_OR_RETURN(vocab->merges, ReadStrings(f, kMergesKey, /*required=*/ranked));
  return absl::OkStatus();
}

absl::Status CheckId(std::string_view key, int32_t id, size_t n) {
  if (id < -1 || (id >= 0 && static_cast<size_t>(id) >= n)) {
    return KeyError(key, absl::StrCat("id ", id, " out of range (vocab has ", n, " tokens)"));
  }
  return absl::OkStatus();
}

bool IsByteTokenText(std::string_view t) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.starts_with("<0x") && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

absl::Status CheckMerges(const TokenizerVocab& vocab) {
  std::unordered_set<std::string_view> tokens(vocab.tokens.begin(), vocab.tokens.end());
  std::string joined;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    const auto bad = [&](std::string_view why) {
      return KeyError(Indexed(kMergesKey, i), "\"" + m + "\": " + std::string(why));
    };
    if (sp == std::string::npos || sp + 1 >= m.size()) return bad("expected \"left right\"");
    const std::string_view left(m.data(), sp);
    const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left).append(right);
    if (!tokens.contains(left) || !tokens.contains(right) || !tokens.contains(joined)) {
      return bad("left, right and their concatenation must all be tokens");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTokenizerVocab(const TokenizerVocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return KeyError(kTokensKey, "no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) return KeyError(kTokensKey, "too many tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return KeyError(kScoresKey, absl::StrCat(vocab.scores.size(), " scores for ", n, " tokens"));
  }
  for (size_t i = 0; i < vocab.scores.size(); ++i) {
    if (!std::isfinite(vocab.scores[i])) return KeyError(Indexed(kScoresKey, i), "not finite");
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    return KeyError(kTypesKey, absl::StrCat(vocab.token_types.size(), " types for ", n, " tokens"));
  }
  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    const auto t = static_cast<int32_t>(vocab.token_types[i]);
    if (t < 1 || t > 6) return KeyError(Indexed(kTypesKey, i), absl::StrCat(t, " not in 1..6"));
  }
  ODMOE_RETURN_IF_ERROR(CheckId(kBosKey, vocab.bos_id, n));
  ODMOE_RETURN_IF_ERROR(CheckId(kEosKey, vocab.eos_id, n));
  ODMOE_RETURN_IF_ERROR(CheckId(kUnkKey, vocab.unk_id, n));
  ODMOE_RETURN_IF_ERROR(CheckId(kPadKey, vocab.pad_id, n));
  if (vocab.model != TokenizerModel::kGpt2) {
    for (size_t i = 0; i < vocab.token_types.size(); ++i) {
      if (vocab.token_types[i] == TokenType::kByte && !IsByteTokenText(vocab.tokens[i])) {
        return KeyError(Indexed(kTokensKey, i), "a byte token must be spelled <0xNN>");
      }
    }
    if (vocab.model == TokenizerModel::kSentencePiece) return absl::OkStatus();
  }
  if (!PreTokenizer::IsSupported(vocab.pre)) {
    return KeyError(kPreKey, absl::StrCat("unsupported pre-tokenizer \"", vocab.pre,
                                          "\" (supported: ", PreTokenizer::SupportedNames(), ")"));
  }
  return CheckMerges(vocab);
}

absl::StatusOr<TokenizerVocab> ReadTokenizerVocab(const GgufFile& file) {
  TokenizerVocab vocab;
  const GgufValue* model = file.Find(kModelKey);
  if (model == nullptr) return KeyError(kModelKey, "missing (the file has no tokenizer)");
  if (model->AsString() == nullptr) return KeyError(kModelKey, "expected a string");
  const std::string& name = *model->AsString();
  if (name == "llama") {
    vocab.model = TokenizerModel::kSentencePiece;
  } else if (name == "gpt2") {
    vocab.model = TokenizerModel::kGpt2;
    vocab.add_bos = false;
  } else if (name == "gemma4") {
    vocab.model = TokenizerModel::kSentencePieceBpe;
    vocab.add_space_prefix = false;
  } else {
    return KeyError(kModelKey, absl::StrCat("unsupported tokenizer \"", name,
                                            "\" (supported: \"llama\", \"gpt2\", \"gemma4\")"));
  }
  ODMOE_RETURN_IF_ERROR(ReadArrays(file, &vocab));
  if (const GgufValue* pre = file.Find(kPreKey)) {
    if (pre->AsString() == nullptr) return KeyError(kPreKey, "expected a string");
    vocab.pre = *pre->AsString();
  }
  if (vocab.model == TokenizerModel::kGpt2)
    vocab.add_bos = PreTokenizer::AddsBosByDefault(vocab.pre);
  ODMOE_RETURN_IF_ERROR(ReadId(file, kBosKey, &vocab.bos_id));
  ODMOE_RETURN_IF_ERROR(ReadId(file, kEosKey, &vocab.eos_id));
  ODMOE_RETURN_IF_ERROR(ReadId(file, kUnkKey, &vocab.unk_id));
  ODMOE_RETURN_IF_ERROR(ReadId(file, kPadKey, &vocab.pad_id));
  const bool add_bos_given = file.Find(kAddBosKey) != nullptr;
  ODMOE_RETURN_IF_ERROR(ReadBool(file, kAddBosKey, &vocab.add_bos));
  ODMOE_RETURN_IF_ERROR(ReadBool(file, kAddEosKey, &vocab.add_eos));
  ODMOE_RETURN_IF_ERROR(ReadBool(file, kAddSpaceKey, &vocab.add_space_prefix));
  if (add_bos_given && vocab.add_bos && vocab.bos_id < 0) {
    return KeyError(kAddBosKey, "true but tokenizer.ggml.bos_token_id is missing");
  }
  if (vocab.pre == "glm4" || vocab.pre == "glm5" || vocab.pre == "chatglm-bpe") {
    // GLM's bos_token_id is [gMASK], which its chat template writes itself:
    // never prepended (as llama.cpp encodes these files).
    vocab.add_bos = false;
  }
  if (vocab.model == TokenizerModel::kSentencePieceBpe) {
    // Gemma 4: its own pre-tokenizer whatever the file names, and BOS even
    // where a converter wrote add_bos_token false (as Gemma's tokenizer and
    // llama.cpp encode).
    vocab.pre = "gemma4";
    vocab.add_bos = vocab.bos_id >= 0;
    vocab.add_space_prefix = false;
  }
  ODMOE_RETURN_IF_ERROR(ValidateTokenizerVocab(vocab));
  return vocab;
}

}  // namespace odmoe
