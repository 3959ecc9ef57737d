#include "tokenizer/pretokenizers.h"

#include <array>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace odmoe {
namespace {

// The patterns, as each model's tokenizer.json "pre_tokenizer" gives them
// (Split regexes; Digits(individual_digits) is \p{N}; ByteLevel(use_regex)
// is the GPT-2 regex). DeepSeek's character classes are spelled with \x{...}.
constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen3.5 / 3.6: Qwen2's with combining marks (\p{M}) in words, and kept out
// of punctuation runs.
constexpr std::string_view kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kO200k =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Kimi-K2 (tiktoken's pattern): Han runs first; o200k's letter classes
// without Han; 1-3 digit numbers; no '/' after punctuation. The source's
// intersections [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] are spelled as
// negated classes: every code point is in exactly one of L, M, N, P, S, Z, C,
// so "L or M, not Ll, not Han" is [^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Ll}\p{sc:Han}]
// (one class, no per-character group: long runs need no backtracking
// stack). Han is the Script property (sc:), as tiktoken's Rust regex and
// Python's regex read \p{Han}; PCRE2's bare \p{Han} is Script_Extensions,
// which would also take 、 and 。.
constexpr std::string_view kKimiK2 =
    R"re(\p{sc:Han}+)re"
    R"re(|[^\r\n\p{L}\p{N}]?[^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Ll}\p{sc:Han}]*)re"
    R"re([^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Lu}\p{Lt}\p{sc:Han}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Ll}\p{sc:Han}]+)re"
    R"re([^\p{C}\p{N}\p{P}\p{S}\p{Z}\p{Lu}\p{Lt}\p{sc:Han}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// SentencePiece-style BPE (Gemma 4): no word splitting, only newline runs
// apart from the rest (spaces are already U+2581).
constexpr std::string_view kNewlineRuns = R"re([^\n]+|\n+)re";
constexpr std::string_view kDigit = R"re(\p{N})re";
constexpr std::string_view kNewline = R"re([\r\n])re";
constexpr std::string_view kDeepSeekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})re"
    R"re(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})re"
    R"re(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})re"
    R"re(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})re"
    R"re(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})re"
    R"re(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})re"
    R"re(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})re"
    R"re(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})re"
    R"re(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})re"
    R"re(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})re"
    R"re(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
    R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})re"
    R"re(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})re"
    R"re(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})re"
    R"re(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})re"
    R"re(\x{1E900}-\x{1E943}]+)re";
constexpr std::string_view kDeepSeekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
constexpr std::string_view kTrailingSpace = R"re(\s+$)re";
constexpr std::string_view kDeepSeekCjk =
    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
constexpr std::string_view kDeepSeekCoderLetters = R"re(\s?\p{L}+)re";
constexpr std::string_view kDeepSeekCoderPunct = R"re(\s?\p{P}+)re";
constexpr std::string_view kDeepSeekV3Digits = R"re(\p{N}{1,3})re";
constexpr std::string_view kDeepSeekV3Cjk =
    R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re";
constexpr std::string_view kDeepSeekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr std::array kGpt2Splits = {kGpt2};
constexpr std::array kStarcoderSplits = {kDigit, kGpt2};
constexpr std::array kLlama3Splits = {kLlama3};
constexpr std::array kQwen2Splits = {kQwen2};
constexpr std::array kQwen35Splits = {kQwen35};
constexpr std::array kO200kSplits = {kO200k};
constexpr std::array kTekkenSplits = {kTekken};
constexpr std::array kKimiK2Splits = {kKimiK2};
constexpr std::array kNewlineRunSplits = {kNewlineRuns};
constexpr std::array kDeepSeekLlmSplits = {kNewline,       kDeepSeekLetters, kDeepSeekPunct,
                                           kTrailingSpace, kDeepSeekCjk,     kDigit};
constexpr std::array kDeepSeekCoderSplits = {kNewline, kDeepSeekCoderLetters, kDeepSeekCoderPunct,
                                             kDeepSeekCjk, kDigit};
constexpr std::array kDeepSeekV3Splits = {kDeepSeekV3Digits, kDeepSeekV3Cjk, kDeepSeekV3Words};

// Unicode White_Space (the same list in Unicode 14 and 15), the set Hugging
// Face's (Oniguruma's) \s matches.
constexpr const char* kWhiteSpaceClass =
    R"re(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})re";

struct TableEntry {
  std::string_view name;
  std::span<const std::string_view> patterns;
  // A pre-token that is one token of the vocabulary is that token, without
  // merges (Hugging Face's BPE ignore_merges; llama.cpp sets it for Llama 3).
  bool ignore_merges = false;
  // BOS is prepended unless the file's tokenizer.ggml.add_bos_token says
  // otherwise (Llama 3 and Mistral files that lack the key; llama.cpp's
  // defaults).
  bool bos_by_default = false;
};

constexpr TableEntry kTable[] = {
    {"default", kGpt2Splits},
    {"gpt-2", kGpt2Splits},
    {"olmo", kGpt2Splits},
    {"mpt", kGpt2Splits},
    {"starcoder", kStarcoderSplits},
    {"llama-bpe", kLlama3Splits, /*ignore_merges=*/true, /*bos_by_default=*/true},
    {"dbrx", kLlama3Splits},
    {"smaug-bpe", kLlama3Splits},
    {"qwen2", kQwen2Splits},
    {"deepseek-r1-qwen", kQwen2Splits},
    {"qwen35", kQwen35Splits},
    {"gpt-4o", kO200kSplits},
    {"llama4", kO200kSplits},
    {"tekken", kTekkenSplits, /*ignore_merges=*/true, /*bos_by_default=*/true},
    {"deepseek-llm", kDeepSeekLlmSplits},
    {"deepseek-coder", kDeepSeekCoderSplits},
    {"deepseek-v3", kDeepSeekV3Splits},
    // GLM-4.5 .. 4.7 / GLM-5: Llama 3's regex, whole-word tokens kept.
    {"glm4", kLlama3Splits, /*ignore_merges=*/true},
    {"glm5", kLlama3Splits, /*ignore_merges=*/true},
    {"chatglm-bpe", kLlama3Splits},
    {"minimax-m2", kO200kSplits},
    {"kimi-k2", kKimiK2Splits},
    {"gemma4", kNewlineRunSplits},
};

const TableEntry* FindEntry(std::string_view name) {
  if (name.empty()) name = "default";
  for (const TableEntry& e : kTable) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Pcre2Message(int code) {
  std::array<PCRE2_UCHAR, 256> buf{};
  if (pcre2_get_error_message(code, buf.data(), buf.size()) < 0)
    return absl::StrCat("error ", code);
  return std::string(reinterpret_cast<const char*>(buf.data()));
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* m) const { pcre2_match_context_free(m); }
};

}  // namespace

struct PreTokenizer::CompiledPattern {
  // Appends the pieces of `piece`: every match and every stretch between.
  absl::Status SplitIsolated(std::string_view table_name, pcre2_match_data* md,
                             std::string_view piece, std::vector<std::string_view>* out) const;

  std::string source;  // the PCRE2 form, for error messages
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  // Read-only after construction (no JIT stack assigned), so shareable.
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context;
};

absl::StatusOr<std::string> ToPcre2Pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char d = pattern[++i];
      if (d == 's') {
        out += in_class ? std::string(kWhiteSpaceClass) : absl::StrCat("[", kWhiteSpaceClass, "]");
      } else if (d == 'S') {
        if (in_class) {
          return absl::InvalidArgumentError("pattern \"" + std::string(pattern) +
                                            "\": \\S inside a character class");
        }
        out += absl::StrCat("[^", kWhiteSpaceClass, "]");
      } else {
        out += c;
        out += d;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // literal ]
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

PreTokenizer::PreTokenizer(std::string name, std::vector<std::unique_ptr<CompiledPattern>> patterns,
                           bool ignore_merges)
    : name_(std::move(name)), patterns_(std::move(patterns)), ignore_merges_(ignore_merges) {}

PreTokenizer::~PreTokenizer() = default;

bool PreTokenizer::IsSupported(std::string_view name) { return FindEntry(name) != nullptr; }

bool PreTokenizer::AddsBosByDefault(std::string_view name) {
  const TableEntry* entry = FindEntry(name);
  return entry != nullptr && entry->bos_by_default;
}

std::string PreTokenizer::SupportedNames() {
  std::string names;
  for (const TableEntry& e : kTable) {
    names += (names.empty() ? "\"" : ", \"") + std::string(e.name) + "\"";
  }
  return names;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view name) {
  const TableEntry* entry = FindEntry(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError("unsupported pre-tokenizer \"" + std::string(name) +
                                      "\" (supported: " + SupportedNames() + ")");
  }
  std::vector<std::unique_ptr<CompiledPattern>> compiled;
  for (std::string_view source : entry->patterns) {
    auto p = std::make_unique<CompiledPattern>();
    absl::StatusOr<std::string> pcre = ToPcre2Pattern(source);
    if (!pcre.ok()) return pcre.status();
    p->source = *std::move(pcre);
    int error = 0;
    PCRE2_SIZE offset = 0;
    p->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p->source.data()), p->source.size(),
                                PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr));
    if (p->code == nullptr) {
      return absl::InternalError("pre-tokenizer \"" + std::string(entry->name) + "\": pattern \"" +
                                 p->source + "\" does not compile at offset " +
                                 std::to_string(offset) + ": " + Pcre2Message(error));
    }
    // Without JIT support (some platforms) the interpreter runs the same pattern.
    (void)pcre2_jit_compile(p->code.get(), PCRE2_JIT_COMPLETE);
    p->context.reset(pcre2_match_context_create(nullptr));
    if (p->context == nullptr) return absl::ResourceExhaustedError("pcre2_match_context_create");
    // The patterns backtrack at most once per character of a run; lift the
    // default limit so multi-megabyte runs (one long word) still match.
    pcre2_set_match_limit(p->context.get(), UINT32_MAX);
    compiled.push_back(std::move(p));
  }
  return std::unique_ptr<PreTokenizer>(
      new PreTokenizer(std::string(entry->name), std::move(compiled), entry->ignore_merges));
}

absl::Status PreTokenizer::CompiledPattern::SplitIsolated(
    std::string_view table_name, pcre2_match_data* md, std::string_view piece,
    std::vector<std::string_view>* out) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t search = 0;  // where the next match may start
  size_t gap = 0;     // start of the text not yet emitted
  while (search < piece.size()) {
    const int rc = pcre2_match(code.get(), subject, piece.size(), search, PCRE2_NO_UTF_CHECK, md,
                               context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError("pre-tokenizer \"" + std::string(table_name) + "\": pattern \"" +
                                 source + "\" failed: " + Pcre2Message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end == begin) {  // an empty match cuts nothing: look again one character on
      if (begin >= piece.size()) break;
      search = begin + ScanUtf8(piece, begin).length;
      continue;
    }
    if (begin > gap) out->push_back(piece.substr(gap, begin - gap));
    out->push_back(piece.substr(begin, end - begin));
    gap = search = end;
  }
  if (gap < piece.size()) out->push_back(piece.substr(gap));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string_view>> PreTokenizer::Split(std::string_view text) const {
  if (const std::optional<size_t> bad = FindInvalidUtf8(text)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid UTF-8 at byte ", *bad));
  }
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& pattern : patterns_) {
    // One match block per pattern and call: a PreTokenizer is shared by threads.
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
        pcre2_match_data_create_from_pattern(pattern->code.get(), nullptr));
    if (md == nullptr) return absl::ResourceExhaustedError("pcre2_match_data_create");
    next.clear();
    next.reserve(pieces.size());
    for (std::string_view piece : pieces) {
      absl::Status s = pattern->SplitIsolated(name_, md.get(), piece, &next);
      if (!s.ok()) return s;
    }
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace odmoe
