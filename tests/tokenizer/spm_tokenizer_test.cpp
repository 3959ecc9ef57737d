// SentencePiece ("llama") tokenizer on a hand-made vocab: merge order, ties,
// byte fallback, unused pieces, special tokens, dummy prefix, errors, and a
// comparison with a naive quadratic reference on random strings.
#include <catch2/catch.hpp>
#include <random>

#include "encode_helper.h"
#include "test_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

using test::MakeSpmTestVocab;
using test::TestVocab;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> Make(const TokenizerVocab& v) {
  auto t = Tokenizer::Create(v);
  REQUIRE(t.ok());
  return std::move(t).value();
}

using test::Enc;

int32_t Byte(int b) { return 3 + b; }

TEST_CASE("spm merges by score, ties leftmost", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  CHECK(Enc(*tok, "the") == Ids{v.Id("\u2581the")});
  CHECK(tok->Encode("the").value() == Ids{1, v.Id("\u2581the")});  // BOS by default
  // "▁aaa": both "aa" pairs score the same; the left one merges first.
  CHECK(Enc(*tok, "aaa") == Ids{v.Id("\u2581"), v.Id("aa"), v.Id("a")});
  // "bc" (-5) beats "ab" (-6).
  CHECK(Enc(*tok, "abc") == Ids{v.Id("\u2581"), v.Id("a"), v.Id("bc")});
  // A leading space gives "▁▁the": "▁t" merges before "▁▁" and blocks it.
  CHECK(Enc(*tok, " the") == Ids{v.Id("\u2581"), v.Id("\u2581the")});
  CHECK(Enc(*tok, "the the") == Ids{v.Id("\u2581the"), v.Id("\u2581the")});
  CHECK(Enc(*tok, "  ") == Ids{v.Id("\u2581\u2581"), v.Id("\u2581")});
}

TEST_CASE("spm unused pieces are merged then split again", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  // "xy" (unused, -0.5) merges before "yz" (-2.5), then is split into x, y.
  CHECK(Enc(*tok, "xyz") == Ids{v.Id("\u2581"), v.Id("x"), v.Id("y"), v.Id("z")});
  CHECK(Enc(*tok, "yz") == Ids{v.Id("\u2581"), v.Id("yz")});
}

TEST_CASE("spm byte fallback and unknown", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  CHECK(Enc(*tok, "\u00e9") == Ids{v.Id("\u2581"), Byte(0xC3), Byte(0xA9)});
  CHECK(Enc(*tok, "a\U0001F600") ==
        Ids{v.Id("\u2581"), v.Id("a"), Byte(0xF0), Byte(0x9F), Byte(0x98), Byte(0x80)});
  CHECK(Enc(*tok, "\u4e2d") == Ids{v.Id("\u2581"), v.Id("\u4e2d")});

  const TestVocab nb = MakeSpmTestVocab(/*byte_tokens=*/false);
  auto tok2 = Make(nb.vocab);
  CHECK(Enc(*tok2, "\u00e9t") == Ids{nb.Id("\u2581"), 0, nb.Id("t")});

  TestVocab no_unk = MakeSpmTestVocab(/*byte_tokens=*/false);
  no_unk.vocab.unk_id = -1;
  no_unk.vocab.token_types[0] = TokenType::kControl;
  auto tok3 = Make(no_unk.vocab);
  auto r = tok3->Encode("\u00e9");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("spm special tokens only with parse_special", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  const int32_t sp = v.Id("\u2581");
  CHECK(Enc(*tok, "<s>") == Ids{sp, v.Id("<"), v.Id("s"), v.Id(">")});
  CHECK(Enc(*tok, "<s>", true, true) == Ids{1, 1});
  // Text after a special token gets the dummy prefix again (llama.cpp, HF legacy).
  CHECK(Enc(*tok, "<s>the", false, true) == Ids{1, v.Id("\u2581the")});
  CHECK(Enc(*tok, "a</s>b", false, true) == Ids{sp, v.Id("a"), 2, sp, v.Id("b")});
  CHECK(Enc(*tok, "the </s>", false, true) == Ids{v.Id("\u2581the"), sp, 2});
  CHECK(Enc(*tok, "<unk>", false, true) == Ids{0});
}

TEST_CASE("spm options: no dummy prefix, EOS, empty text", "[tokenizer]") {
  TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  CHECK(tok->Encode("").value() == Ids{1});
  CHECK(Enc(*tok, "") == Ids{});
  Tokenizer::EncodeOptions o;
  o.add_eos = true;
  CHECK(tok->Encode("the", o).value() == Ids{1, v.Id("\u2581the"), 2});
  v.vocab.add_eos = true;
  auto tok_eos = Make(v.vocab);
  CHECK(tok_eos->Encode("the").value() == Ids{1, v.Id("\u2581the"), 2});
  CHECK(Enc(*tok_eos, "the") == Ids{v.Id("\u2581the")});
  v.vocab.add_eos = false;
  v.vocab.add_space_prefix = false;
  auto tok2 = Make(v.vocab);
  CHECK(Enc(*tok2, "the") == Ids{v.Id("t"), v.Id("he")});
  CHECK(tok2->Decode(Enc(*tok2, " the")) == " the");
  v.vocab.add_bos = false;
  auto tok3 = Make(v.vocab);
  CHECK(tok3->Encode("").value() == Ids{});
}

TEST_CASE("spm rejects invalid UTF-8 with the offset", "[tokenizer]") {
  auto tok = Make(MakeSpmTestVocab().vocab);
  for (const std::string& bad :
       {std::string("ab\xFF"
                    "c"),
        std::string("ab\xC3"), std::string("ab\xED\xA0\x80"), std::string("ab\xC0\x80")}) {
    auto r = tok->Encode(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("offset 2"));
  }
}

TEST_CASE("spm decode", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  const int32_t the = v.Id("\u2581the");
  CHECK(tok->Decode(Ids{1, the, v.Id("\u2581t"), v.Id("he"), 2}) == "the the");
  CHECK(tok->Decode(Ids{v.Id("\u2581"), Byte(0xC3), Byte(0xA9)}) == "\u00e9");
  CHECK(tok->Decode(Ids{Byte(0xC3)}) == "\uFFFD");
  CHECK(tok->Decode(Ids{Byte(0xE2), Byte(0x82), v.Id("x")}) == "\uFFFD\uFFFDx");
  CHECK(tok->Decode(Ids{Byte(0x20), the}) == "  the");     // byte tokens keep their space
  CHECK(tok->Decode(Ids{v.Id("\u2581"), the}) == " the");  // only the first piece loses it
  CHECK(tok->Decode(Ids{0, the}) == " \u2047  the");       // SentencePiece's unk surface
  CHECK(tok->Decode(Ids{-5, 100000, the}) == "the");
  CHECK(tok->TokenToPiece(the) == " the");
  CHECK(tok->TokenToPiece(1).empty());
  CHECK(tok->TokenToPiece(Byte(0x41)) == "A");
  CHECK(tok->TokenToPiece(-1).empty());
  CHECK(tok->IsControl(2));
  CHECK_FALSE(tok->IsControl(the));
  CHECK(tok->TokenId("\u2581the") == the);
  CHECK(tok->TokenId("nope") == -1);
}

// Quadratic SentencePiece BPE straight from the definition: repeatedly merge
// the best-scoring adjacent pair (leftmost on ties) into a vocab piece.
struct RefSymbol {
  std::string text;
  Ids split;  // output if this symbol is an unused piece that must be split
};

Ids RefEmit(const TestVocab& v, const RefSymbol& s) {
  for (size_t i = 0; i < v.vocab.tokens.size(); ++i) {
    const TokenType t = v.vocab.token_types[i];
    if (v.vocab.tokens[i] != s.text || t == TokenType::kByte || t == TokenType::kControl ||
        t == TokenType::kUnknown) {
      continue;
    }
    if (t == TokenType::kUnused && !s.split.empty()) return s.split;
    return {static_cast<int32_t>(i)};
  }
  Ids bytes;
  for (unsigned char c : s.text) bytes.push_back(Byte(c));
  return bytes;
}

Ids RefEncode(const TestVocab& v, const std::string& text) {
  std::string s = "\u2581";
  for (char c : text) s += c == ' ' ? std::string("\u2581") : std::string(1, c);
  std::vector<RefSymbol> syms;
  for (size_t p = 0; p < s.size();) {
    size_t n = 1;
    while (p + n < s.size() && (static_cast<unsigned char>(s[p + n]) & 0xC0) == 0x80) ++n;
    syms.push_back({s.substr(p, n), {}});
    p += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const std::string joined = syms[i].text + syms[i + 1].text;
      for (size_t k = 0; k < v.vocab.tokens.size(); ++k) {
        const TokenType t = v.vocab.token_types[k];
        const bool mergeable = t == TokenType::kNormal || t == TokenType::kUnused;
        if (mergeable && v.vocab.tokens[k] == joined &&
            (best < 0 || v.vocab.scores[k] > best_score)) {
          best = static_cast<int>(i);
          best_score = v.vocab.scores[k];
        }
      }
    }
    if (best < 0) break;
    Ids split = RefEmit(v, syms[best]);
    const Ids right = RefEmit(v, syms[best + 1]);
    split.insert(split.end(), right.begin(), right.end());
    syms[best] = {syms[best].text + syms[best + 1].text, split};
    syms.erase(syms.begin() + best + 1);
  }
  Ids out;
  for (const RefSymbol& sym : syms) {
    const Ids e = RefEmit(v, sym);
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

TEST_CASE("spm matches a naive reference on random strings", "[tokenizer]") {
  const TestVocab v = MakeSpmTestVocab();
  auto tok = Make(v.vocab);
  const std::vector<std::string> alphabet = {"t", "h", "e", "a",      "b",      "c", "x", "y",
                                             "z", " ", " ", "\u00e9", "\u4e2d", "<", "s", ">"};
  std::mt19937 rng(42);
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    INFO("text: \"" << s << "\"");
    const Ids ids = Enc(*tok, s);
    if (!s.empty()) CHECK(ids == RefEncode(v, s));
    CHECK(tok->Decode(ids) == s);
  }
}

}  // namespace
}  // namespace odmoe
