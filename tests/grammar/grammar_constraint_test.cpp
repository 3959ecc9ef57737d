// GrammarConstraint (grammar/grammar_constraint.h) over real tokenizers: the
// byte-level BPE fixture (tests/data/gpt2-tokenizer.gguf) and the tiny
// model's SentencePiece vocabulary (models/tiny-mixtral-f16.gguf). Masks
// equal a token-by-token check; special tokens never pass; EOS only on a
// complete match; and sampling from random logits through the mask, 200
// seeds per vocabulary, always ends in JSON that a validator accepts.
#include "grammar/grammar_constraint.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf_reader.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& relative) {
  return test::TokenizerOf(relative);
}
std::shared_ptr<const Grammar> Compile(const std::string& gbnf) { return test::CompileGbnf(gbnf); }

const char* const kVocabs[] = {"tests/data/gpt2-tokenizer.gguf", "models/tiny-mixtral-f16.gguf"};

/// The row MaskLogits leaves: allowed ids.
std::vector<int32_t> AllowedIds(GrammarConstraint& c, int32_t n) {
  std::vector<float> row(n, 0.0f);
  c.MaskLogits(row);
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i) {
    if (!std::isinf(row[i])) ids.push_back(i);
  }
  return ids;
}

TEST_CASE("masks equal a token-by-token check on both vocabularies", "[grammar]") {
  const std::string vocab = GENERATE(kVocabs[0], kVocabs[1]);
  auto tok = LoadTokenizer(vocab);
  // Bounded (a state per character) and unbounded (one state for the whole
  // string: masks take the self-loop shortcut) string contents.
  const std::string content =
      GENERATE(as<std::string>(), R"([^"\\]{0,12})", R"(([^"\\] | "\\" ["\\n])*)");
  const auto g =
      Compile(R"(root ::= "{\"name\": \"" )" + content + R"( "\", \"n\": " [0-9]{1,3} "}")");
  const std::string text = "{\"name\": \"Al ice\", \"n\": 42}";
  GrammarConstraint c(g, VocabTrie::ForTokenizer(*tok), tok->eos_id());
  // Feed the text byte-sized prefix by prefix through tokens the mask allows
  // (the first allowed token that continues the text), checking each mask.
  size_t done = 0;
  int steps = 0;
  while (done < text.size()) {
    const std::vector<int32_t> allowed = AllowedIds(c, tok->n_vocab());
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      const std::string piece = tok->TokenToPiece(id);
      const TokenType type =
          tok->vocab().token_types.empty() ? TokenType::kNormal : tok->vocab().token_types[id];
      bool want = false;
      if (!piece.empty() && type != TokenType::kControl && type != TokenType::kUnknown) {
        GrammarMatcher fresh(g);
        want = fresh.AcceptBytes(text.substr(0, done) + piece);
      }
      const bool got = std::binary_search(allowed.begin(), allowed.end(), id);
      INFO(vocab << " after \"" << text.substr(0, done) << "\": token " << id << " \"" << piece
                 << "\"");
      REQUIRE(got == want);
    }
    // The longest allowed token that continues the text.
    int32_t best = -1;
    size_t best_len = 0;
    for (const int32_t id : allowed) {
      const std::string piece = tok->TokenToPiece(id);
      if (text.compare(done, piece.size(), piece) == 0 && piece.size() > best_len)
        best = id, best_len = piece.size();
    }
    REQUIRE(best >= 0);
    REQUIRE(c.Accept(best).ok());
    done += best_len;
    ++steps;
  }
  CHECK(c.Complete());
  CHECK(AllowedIds(c, tok->n_vocab()) == std::vector<int32_t>{tok->eos_id()});
  CHECK(c.Accept(tok->eos_id()).ok());
  WARN(vocab << ": " << steps << " tokens for " << text.size() << " bytes");
}

TEST_CASE("special tokens never pass, EOS only when complete", "[grammar]") {
  const std::string vocab = GENERATE(kVocabs[0], kVocabs[1]);
  auto tok = LoadTokenizer(vocab);
  const int32_t eos = tok->eos_id();
  REQUIRE(eos >= 0);
  const auto g = Compile(R"(root ::= [a-z]+)");
  GrammarConstraint c(g, VocabTrie::ForTokenizer(*tok), eos);
  auto allowed = AllowedIds(c, tok->n_vocab() + 5);  // a padded row: the padding is masked
  REQUIRE(!allowed.empty());
  CHECK(!std::binary_search(allowed.begin(), allowed.end(), eos));
  CHECK(allowed.back() < tok->n_vocab());
  for (const int32_t id : allowed) CHECK(!tok->IsControl(id));
  const absl::Status early = c.Accept(eos);
  CHECK(early.code() == absl::StatusCode::kFailedPrecondition);
  const int32_t a = tok->TokenId(vocab == kVocabs[0] ? "a" : "a");
  REQUIRE(a >= 0);
  REQUIRE(c.Accept(a).ok());
  allowed = AllowedIds(c, tok->n_vocab());
  CHECK(std::binary_search(allowed.begin(), allowed.end(), eos));
  CHECK(allowed.size() > 1);
  const int32_t brace = tok->TokenId("{");
  if (brace >= 0) CHECK(c.Accept(brace).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(c.Allows(a));
  CHECK(c.Accept(eos).ok());
  CHECK(AllowedIds(c, tok->n_vocab()) == std::vector<int32_t>{eos});
  CHECK(c.Accept(a).code() == absl::StatusCode::kFailedPrecondition);
}

// ---- a small validator for the schema subset the sampling test uses ----

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool Validate(const nlohmann::json& v, const nlohmann::json& s, std::string* why) {
  auto fail = [&](const std::string& w) {
    *why = w + " at " + v.dump();
    return false;
  };
  if (s.contains("anyOf")) {
    for (const auto& b : s["anyOf"]) {
      std::string ignored;
      if (Validate(v, b, &ignored)) return true;
    }
    return fail("anyOf");
  }
  if (s.contains("enum")) {
    for (const auto& e : s["enum"]) {
      if (e == v) return true;
    }
    return fail("enum");
  }
  const std::string type = s.value("type", "");
  if (type == "object") {
    if (!v.is_object()) return fail("type");
    for (const auto& r : s.value("required", nlohmann::json::array())) {
      if (!v.contains(r.get<std::string>())) return fail("required " + r.get<std::string>());
    }
    for (auto& [k, sub] : v.items()) {
      if (!s["properties"].contains(k)) return fail("extra key " + k);
      if (!Validate(sub, s["properties"][k], why)) return false;
    }
  } else if (type == "array") {
    if (!v.is_array()) return fail("type");
    if (v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", 1000u))
      return fail("items");
    for (const auto& e : v) {
      if (!Validate(e, s["items"], why)) return false;
    }
  } else if (type == "string") {
    if (!v.is_string()) return fail("type");
    const size_t n = CodePoints(v.get<std::string>());
    if (n < s.value("minLength", 0u) || n > s.value("maxLength", 1000u)) return fail("length");
  } else if (type == "integer") {
    if (!v.is_number_integer()) return fail("type");
    if (v.get<int64_t>() < s.value("minimum", INT64_MIN) ||
        v.get<int64_t>() > s.value("maximum", INT64_MAX)) {
      return fail("range");
    }
  } else if (type == "boolean") {
    if (!v.is_boolean()) return fail("type");
  } else if (type == "null") {
    if (!v.is_null()) return fail("type");
  }
  return true;
}

TEST_CASE("sampling through the mask always gives valid JSON (200 seeds per vocabulary)",
          "[grammar]") {
  const std::string vocab = GENERATE(kVocabs[0], kVocabs[1]);
  auto tok = LoadTokenizer(vocab);
  const int32_t eos = tok->eos_id();
  const nlohmann::json schema = nlohmann::json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "role": {"enum": ["admin", "user", null]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3},
      "ok": {"type": "boolean"},
      "pet": {"anyOf": [{"type": "null"},
                        {"type": "object", "properties": {"legs": {"type": "integer", "minimum": 0, "maximum": 8}},
                         "required": ["legs"]}]}
    },
    "required": ["name", "age", "tags"]
  })");
  auto gbnf = JsonSchemaToGbnf(nlohmann::ordered_json(schema));
  REQUIRE(gbnf.ok());
  const auto g = Compile(*gbnf);
  const auto trie = VocabTrie::ForTokenizer(*tok);
  size_t total_tokens = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    GrammarConstraint c(g, trie, eos);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::string text;
    bool ended = false;
    for (int step = 0; step < 2000 && !ended; ++step) {
      std::vector<float> row(tok->n_vocab());
      for (float& x : row) x = normal(rng);
      c.MaskLogits(row);
      // Softmax sampling over what is left.
      double total = 0;
      for (const float x : row) total += std::isinf(x) ? 0.0 : std::exp(x);
      REQUIRE(total > 0);
      double u = std::uniform_real_distribution<double>(0, total)(rng);
      int32_t pick = -1;
      for (int32_t i = 0; i < tok->n_vocab(); ++i) {
        if (std::isinf(row[i])) continue;
        pick = i;
        if ((u -= std::exp(row[i])) <= 0) break;
      }
      const absl::Status st = c.Accept(pick);
      INFO(vocab << " seed " << seed << ": " << text << " + token " << pick << ": " << st);
      REQUIRE(st.ok());
      if (pick == eos) {
        ended = true;
      } else {
        text += tok->TokenToPiece(pick);
      }
      ++total_tokens;
    }
    INFO(vocab << " seed " << seed << ": " << text);
    REQUIRE(ended);
    const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    REQUIRE(!value.is_discarded());
    std::string why;
    const bool valid = Validate(value, schema, &why);
    INFO(why);
    CHECK(valid);
  }
  WARN(vocab << ": 200 outputs, " << total_tokens << " tokens, all valid");
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("mask cache: least recently used masks go first, within the byte budget", "[grammar]") {
  MaskCache cache(3 * (8 * 8 + 2));  // three masks of 8 words with 2-byte keys
  auto mask = [](uint64_t v) { return std::make_shared<const std::vector<uint64_t>>(8, v); };
  cache.Insert("k1", mask(1));
  cache.Insert("k2", mask(2));
  cache.Insert("k3", mask(3));
  REQUIRE(cache.Find("k1"));  // k1 is now the most recent
  cache.Insert("k4", mask(4));
  CHECK(cache.Find("k2") == nullptr);
  CHECK((*cache.Find("k1"))[0] == 1);
  CHECK((*cache.Find("k4"))[0] == 4);
  CHECK(cache.bytes() <= 3 * (8 * 8 + 2));
}

TEST_CASE("constraints with the same grammar share masks, and the shared masks are right",
          "[grammar]") {
  auto tok = LoadTokenizer(kVocabs[0]);
  const std::string gbnf = R"(root ::= "[" [0-9a-z ]{0,6} "]")";
  const auto trie = VocabTrie::ForTokenizer(*tok);
  // Two separately compiled copies of one grammar: equal fingerprints.
  const auto g1 = Compile(gbnf), g2 = Compile(gbnf);
  REQUIRE(g1->fingerprint == g2->fingerprint);
  CHECK(Compile(R"(root ::= "[" [0-9a-z ]{0,5} "]")")->fingerprint != g1->fingerprint);
  GrammarConstraint a(g1, trie, tok->eos_id()), b(g2, trie, tok->eos_id());
  const std::string text = "[ab12]";  // one-character tokens (no space: GPT-2 spells it \u0120)
  for (size_t i = 0; i <= text.size(); ++i) {
    const std::vector<uint64_t> first = a.AllowedTokens();
    CHECK(b.AllowedTokens() == first);
    // The same mask from scratch (no cache: a fresh trie id).
    GrammarConstraint fresh(g1, VocabTrie::FromPieces(trie->pieces), tok->eos_id());
    REQUIRE(fresh.Accept(tok->TokenId("[")).ok());
    for (size_t k = 1; k < i; ++k) REQUIRE(fresh.Accept(tok->TokenId(text.substr(k, 1))).ok());
    if (i > 0) CHECK(fresh.AllowedTokens() == first);
    if (i == text.size()) break;
    const int32_t id = tok->TokenId(text.substr(i, 1));
    REQUIRE(id >= 0);
    REQUIRE(a.Accept(id).ok());
    REQUIRE(b.Accept(id).ok());
  }
  CHECK(a.Complete());
  CHECK(MaskCache::Shared().bytes() > 0);
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("Save and Restore go back to a state, also in another constraint", "[grammar]") {
  auto tok = LoadTokenizer(kVocabs[1]);
  const auto g = Compile(R"g(root ::= "(" [a-c]{1,4} ")")g");
  GrammarConstraint a(g, VocabTrie::ForTokenizer(*tok), tok->eos_id());
  auto id = [&](const char* text) {
    const int32_t t = tok->TokenId(text);
    REQUIRE(t >= 0);
    return t;
  };
  REQUIRE(a.Accept(id("(")).ok());
  const GrammarConstraint::Snapshot at_open = a.Save();
  const std::vector<uint64_t> mask_open = a.AllowedTokens();
  REQUIRE(a.Accept(id("a")).ok());
  REQUIRE(a.Accept(id(")")).ok());
  REQUIRE(a.Complete());
  REQUIRE(a.Accept(tok->eos_id()).ok());
  a.Restore(at_open);
  CHECK_FALSE(a.Complete());
  CHECK(a.AllowedTokens() == mask_open);
  CHECK(a.Accept(id("b")).ok());
  // A snapshot works in a fresh constraint of the same grammar (whose state
  // table never saw it).
  GrammarConstraint b(g, VocabTrie::ForTokenizer(*tok), tok->eos_id());
  b.Restore(at_open);
  CHECK(b.AllowedTokens() == mask_open);
  CHECK(b.Accept(id(")")).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(b.Accept(id("c")).ok());
}

}  // namespace
}  // namespace odmoe

std::string testing_ids(const std::vector<int32_t>& ids, const odmoe::Tokenizer& tok) {
  std::string out;
  for (int32_t id : ids) out += std::to_string(id) + "='" + tok.vocab().tokens[id] + "' ";
  return out;
}

namespace odmoe {
namespace {

TEST_CASE("grammar constraint: a token reference allows that control token and nothing spelling it",
          "[grammar]") {
  std::unique_ptr<Tokenizer> tok = test::TokenizerOf("models/tiny-mixtral-f16.gguf");
  const int32_t bos = tok->bos_id();
  REQUIRE(bos >= 0);
  REQUIRE(tok->vocab().tokens[bos] == "<s>");
  // BOS is a control token: named by <s> it may come, and only there.
  std::unique_ptr<GrammarConstraint> rule =
      MakeGrammarConstraint(test::CompileGbnf("root ::= \"a\" <s> \"b\""), *tok, tok->eos_id());
  const int32_t a = tok->TokenId("a");
  REQUIRE(a >= 0);
  CHECK_FALSE(rule->Allows(bos));
  REQUIRE(rule->Accept(a).ok());
  CHECK(rule->Allows(bos));
  // Text that spells "<s>" is not the token.
  for (const char* piece : {"<", "▁<"}) {
    const int32_t id = tok->TokenId(piece);
    if (id >= 0) CHECK_FALSE(rule->Allows(id));
  }
  std::vector<float> logits(static_cast<size_t>(tok->n_vocab()), 0.0f);
  rule->MaskLogits(logits);
  std::vector<int32_t> allowed;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == 0.0f) allowed.push_back(static_cast<int32_t>(i));
  }
  INFO("allowed: " << ::testing_ids(allowed, *tok));
  CHECK(allowed == std::vector<int32_t>{bos});
  CHECK(logits[static_cast<size_t>(bos)] == 0.0f);
  REQUIRE(rule->Accept(bos).ok());
  CHECK(rule->Allows(tok->TokenId("b")));

  // A grammar that does not name it never allows it, even where any text may come.
  std::unique_ptr<GrammarConstraint> any =
      MakeGrammarConstraint(test::CompileGbnf("root ::= .*"), *tok, tok->eos_id());
  CHECK_FALSE(any->Allows(bos));

  // Errors name the reference.
  absl::StatusOr<std::shared_ptr<const Grammar>> bad = ParseGbnf("root ::= <s \"b\"");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("unterminated token reference") !=
        std::string::npos);
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("grammar caches: a grammar text parsed once, a trie per tokenizer instance",
          "[grammar]") {
  auto a = ParseGbnfCached("root ::= \"cached\" [0-9]");
  auto b = ParseGbnfCached("root ::= \"cached\" [0-9]");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->get() == b->get());  // the same compiled grammar
  CHECK(ParseGbnfCached("root ::= \"other\"")->get() != a->get());
  CHECK_FALSE(ParseGbnfCached("root ::= missing").ok());
  CHECK_FALSE(ParseGbnfCached("root ::= missing").ok());  // errors are not kept

  std::unique_ptr<Tokenizer> first = test::TokenizerOf("models/tiny-mixtral-f16.gguf");
  std::unique_ptr<Tokenizer> second = test::TokenizerOf("models/tiny-mixtral-f16.gguf");
  CHECK(first->instance_id() != second->instance_id());
  CHECK(VocabTrie::ForTokenizer(*first) == VocabTrie::ForTokenizer(*first));
  CHECK(VocabTrie::ForTokenizer(*first) != VocabTrie::ForTokenizer(*second));
}

}  // namespace
}  // namespace odmoe
