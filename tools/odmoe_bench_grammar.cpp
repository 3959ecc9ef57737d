// odmoe-bench-grammar: the cost of grammar-constrained decoding per token
// (grammar/grammar_constraint.h) on a Qwen-sized vocabulary: a synthetic
// byte-level vocabulary of 151,936 tokens (every byte, English words with
// and without a leading space, capitalized, code and JSON fragments, numbers,
// whitespace runs, accented and CJK pieces, then letter n-grams until the
// size is reached), or a GGUF file's own tokenizer with --model.
//
// It writes a JSON object for a typical schema (a person with an address,
// tags, an enum, numbers, booleans) the way a model would: at each step the
// mask over the whole vocabulary, then the longest allowed token that
// continues the text, accepted. Printed: the trie build, the microseconds
// per token for the mask and for the accept (mean, median, p99, max), the
// first request (cold caches) and a second one, and the ratio of the mean
// mask + accept to a decode step (--decode-ms; the default, 120 ms, is a
// Qwen3-30B-A3B-shaped model's step at 2 threads: 8 layers decode at about
// 50 tok/s on this machine, docs/benchmarks.md, scaled to its 48 layers).
//
//   odmoe-bench-grammar
//   odmoe-bench-grammar --requests 5 --decode-ms 120
//   odmoe-bench-grammar --model FILE.gguf
//   odmoe-bench-grammar --decode-model models/tiny-mixtral-f16.gguf   # and a measured step
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/reference_engine.h"
#include "gguf/gguf_reader.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"
#include "util/cli_args.h"

namespace odmoe {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::vector<std::string> SyntheticVocab(size_t size) {
  static const char* const kWords[] = {
      "the",    "of",     "and",   "to",      "in",     "is",       "that",   "for",    "it",
      "as",     "was",    "with",  "be",      "by",     "on",       "not",    "he",     "this",
      "are",    "or",     "his",   "from",    "at",     "which",    "but",    "have",   "an",
      "had",    "they",   "you",   "were",    "their",  "one",      "all",    "we",     "can",
      "her",    "has",    "there", "been",    "if",     "more",     "when",   "will",   "would",
      "who",    "so",     "no",    "name",    "age",    "city",     "street", "email",  "address",
      "tags",   "true",   "false", "null",    "id",     "value",    "type",   "data",   "items",
      "user",   "admin",  "count", "list",    "return", "def",      "class",  "import", "self",
      "int",    "string", "const", "let",     "var",    "function", "public", "static", "void",
      "std",    "vector", "auto",  "include", "json",   "object",   "array",  "number", "boolean",
      "London", "Paris",  "Alice", "Bob",     "New",    "York",     "road"};
  static const char* const kFragments[] = {
      "{",        "}",        "[",        "]",  "\"", "\":", "\",",  "\": \"", "\", \"", "{\"",
      "\"}",      "\"]",      "[\"",      ", ", ": ", "},",  "],",   "{\n",    "\n}",    "  \"",
      "\n  \"",   "\n    \"", "();",      "()", "->", "::",  "==",   "!=",     "<=",     ">=",
      "&&",       "||",       "//",       "/*", "*/", "\n",  "\n\n", "\t",     "  ",     "    ",
      "        ", ".",        ",",        ";",  ":",  "!",   "?",    "'",      "-",      "_",
      "@",        ".com",     "@example", "é",  "è",  "ü",   "ñ",    "日本",   "中文",   "東京",
      "—",        "…",        "’s",       "“",  "”"};
  std::set<std::string> seen;
  std::vector<std::string> vocab;
  auto add = [&](const std::string& s) {
    if (!s.empty() && seen.insert(s).second) vocab.push_back(s);
  };
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (const char* f : kFragments) add(f);
  for (const char* w : kWords) {
    std::string cap = w;
    cap[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cap[0])));
    for (const std::string& s :
         {std::string(w), " " + std::string(w), cap, " " + cap, "\"" + std::string(w),
          std::string(w) + "\"", "\"" + std::string(w) + "\":"}) {
      add(s);
    }
  }
  for (int n = 0; n < 1000; ++n) add(std::to_string(n)), add(" " + std::to_string(n));
  std::mt19937 rng(151936);
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  std::discrete_distribution<int> letter({12,  9,   8,   7.5, 7,    6.7,  6.3, 6,   6,
                                          4.2, 4,   2.8, 2.8, 2.4,  2.4,  2.2, 2,   2,
                                          1.9, 1.5, 1,   0.8, 0.15, 0.15, 0.1, 0.07});
  while (vocab.size() < size) {
    const int len = 2 + static_cast<int>(rng() % 9);
    std::string s = rng() % 2 ? " " : "";
    for (int i = 0; i < len; ++i) s += letters[letter(rng)];
    if (rng() % 7 == 0)
      s[s[0] == ' ' ? 1 : 0] =
          static_cast<char>(std::toupper(static_cast<unsigned char>(s[s[0] == ' ' ? 1 : 0])));
    add(s);
  }
  vocab.resize(size);
  // The last few ids are special tokens (no bytes: never allowed); one is EOS.
  for (size_t i = size - 16; i < size; ++i) vocab[i].clear();
  return vocab;
}

constexpr const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
        "required": ["street", "city"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "role": {"enum": ["admin", "user", "guest"]},
    "score": {"type": "number"},
    "active": {"type": "boolean"},
    "notes": {"type": ["string", "null"]}
  },
  "required": ["name", "age", "address", "tags", "role", "active"]
})";

constexpr const char* kInstance =
    "{\"name\": \"Alice Johnson\", \"age\": 34, \"email\": \"alice.johnson@example.com\", "
    "\"address\": {\"street\": "
    "\"221B Baker Street\", \"city\": \"London\", \"zip\": \"12345\"}, \"tags\": [\"engineer\", "
    "\"runner\", "
    "\"book club\", \"café owner\"], \"role\": \"admin\", \"score\": 87.25, \"active\": true, "
    "\"notes\": \"Prefers "
    "email over phone; speaks English, French and a little 日本語. Available on weekdays after 5 "
    "pm.\"}";

struct RunStats {
  std::vector<double> mask_us, accept_us;
  size_t bytes = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}
double Mean(const std::vector<double>& v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

absl::StatusOr<RunStats> OneRequest(const std::shared_ptr<const Grammar>& g,
                                    const std::shared_ptr<const VocabTrie>& trie, int32_t eos) {
  GrammarConstraint c(g, trie, eos);
  RunStats st;
  const std::string text = kInstance;
  std::vector<float> row(trie->n_vocab());
  size_t done = 0;
  while (done < text.size()) {
    std::fill(row.begin(), row.end(), 0.0f);
    const auto t0 = Clock::now();
    c.MaskLogits(row);
    const auto t1 = Clock::now();
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < trie->n_vocab(); ++id) {
      if (row[id] != 0.0f) continue;
      const std::string& p = trie->pieces[id];
      if (p.size() > best_len && text.compare(done, p.size(), p) == 0)
        best = id, best_len = p.size();
    }
    if (best < 0)
      return absl::InternalError("no allowed token continues the text at byte " +
                                 std::to_string(done));
    const auto t2 = Clock::now();
    absl::Status s = c.Accept(best);
    const auto t3 = Clock::now();
    if (!s.ok()) return s;
    st.mask_us.push_back(Us(t0, t1));
    st.accept_us.push_back(Us(t2, t3));
    done += best_len;
  }
  if (!c.Complete()) return absl::InternalError("the text did not complete the grammar");
  st.bytes = done;
  return st;
}

int Main(int argc, char** argv) {
  CliArgs args("odmoe-bench-grammar", "Grammar masking cost per token on a 150k-token vocabulary.");
  std::string model;
  int requests = 3;
  float decode_ms = 120.0f;
  args.AddString("model", &model, "FILE",
                 "use this GGUF file's tokenizer instead of the synthetic vocabulary");
  args.AddInt("requests", &requests, "N", "requests (each a fresh constraint: cold caches)");
  args.AddFloat("decode-ms", &decode_ms, "MS", "the decode step to compare with");
  std::string decode_model;
  args.AddString(
      "decode-model", &decode_model, "FILE",
      "also measure this model's decode step (2 threads, 32 tokens) and compare with it");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;

  auto gbnf = JsonSchemaToGbnf(std::string_view(kSchema));
  if (!gbnf.ok()) return std::fprintf(stderr, "%s\n", gbnf.status().ToString().c_str()), 1;
  auto grammar = ParseGbnf(*gbnf);
  if (!grammar.ok()) return std::fprintf(stderr, "%s\n", grammar.status().ToString().c_str()), 1;

  const auto t0 = Clock::now();
  std::shared_ptr<const VocabTrie> trie;
  int32_t eos = -1;
  std::unique_ptr<Tokenizer> tok;
  if (model.empty()) {
    trie = VocabTrie::FromPieces(SyntheticVocab(151936));
    eos = trie->n_vocab() - 1;
  } else {
    auto file = GgufFile::Open(model);
    if (!file.ok()) return std::fprintf(stderr, "%s\n", file.status().ToString().c_str()), 1;
    auto t = Tokenizer::FromGguf(**file);
    if (!t.ok()) return std::fprintf(stderr, "%s\n", t.status().ToString().c_str()), 1;
    tok = std::move(t).value();
    trie = VocabTrie::Build(*tok);
    eos = tok->eos_id();
  }
  const double build_ms = Us(t0, Clock::now()) / 1000;
  std::printf("vocabulary: %d tokens (%s), trie %zu nodes, built in %.1f ms\n", trie->n_vocab(),
              model.empty() ? "synthetic byte-level" : model.c_str(), trie->nodes.size(), build_ms);
  std::printf("grammar: %zu bytes of GBNF from the schema\n", gbnf->size());
  std::printf("%-8s %6s %10s %10s %10s %10s %10s %12s\n", "request", "tokens", "mask mean",
              "mask p50", "mask p99", "mask max", "accept", "ratio");
  for (int r = 0; r < requests; ++r) {
    auto st = OneRequest(*grammar, trie, eos);
    if (!st.ok()) return std::fprintf(stderr, "%s\n", st.status().ToString().c_str()), 1;
    const double per_token = Mean(st->mask_us) + Mean(st->accept_us);
    std::printf("%-8d %6zu %8.1fus %8.1fus %8.1fus %8.1fus %8.2fus %10.3f%%\n", r + 1,
                st->mask_us.size(), Mean(st->mask_us), Percentile(st->mask_us, 0.5),
                Percentile(st->mask_us, 0.99), Percentile(st->mask_us, 1.0), Mean(st->accept_us),
                100.0 * per_token / (decode_ms * 1000));
  }
  std::printf(
      "ratio: mean (mask + accept) per token against a %.1f ms decode step (target < 5%%)\n",
      decode_ms);
  if (!decode_model.empty()) {
    auto engine = ReferenceEngine::Create(decode_model, EngineOptions{.backend = "cpu:2"});
    if (!engine.ok()) return std::fprintf(stderr, "%s\n", engine.status().ToString().c_str()), 1;
    GenerateRequest request;
    request.prompt = "The history of the city of";
    request.max_tokens = 32;
    request.ignore_eos = true;
    auto r = (*engine)->Generate(request);
    if (!r.ok()) return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    const double tok_s = r->stats.decode_tokens_per_second();
    std::printf("decode step of %s at 2 threads: %.3f ms (%.1f tok/s)\n", decode_model.c_str(),
                1000.0 / tok_s, tok_s);
  }
  return 0;
}

}  // namespace
}  // namespace odmoe

int main(int argc, char** argv) { return odmoe::Main(argc, argv); }
