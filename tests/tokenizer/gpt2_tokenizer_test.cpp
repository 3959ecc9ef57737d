// GPT-2 byte-level BPE on a hand-made vocab, and its pre-tokenizer.
#include <catch2/catch.hpp>
#include <random>

#include "gpt2_pretokenizer_oracle.h"
#include "test_vocabs.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer.h"
#include "unicode_classes.h"

namespace odmoe {
namespace {

using test::ClassifyCodepoint;
using test::CodepointClass;
using test::MakeGpt2TestVocab;
using test::TestVocab;
using Ids = std::vector<int32_t>;
using Words = std::vector<std::string_view>;

std::unique_ptr<Tokenizer> Make(const TokenizerVocab& v) {
  auto t = Tokenizer::Create(v);
  REQUIRE(t.ok());
  return std::move(t).value();
}

// The "gpt-2" table entry's pieces, checked against the former hand-written
// matcher (the oracle) on the way.
Words Gpt2PreTokenize(std::string_view s) {
  static const std::unique_ptr<PreTokenizer> pre = PreTokenizer::Create("gpt-2").value();
  auto pieces = pre->Split(s);
  REQUIRE(pieces.ok());
  CHECK(*pieces == test::Gpt2PreTokenize(s));
  return *pieces;
}

Ids Enc(const Tokenizer& t, std::string_view s, bool special = false) {
  Tokenizer::EncodeOptions o;
  o.parse_special = special;
  auto r = t.Encode(s, o);
  REQUIRE(r.ok());
  return *r;
}

TEST_CASE("unicode classes", "[tokenizer]") {
  CHECK(ClassifyCodepoint(U'a') == CodepointClass::kLetter);
  CHECK(ClassifyCodepoint(U'\u00e9') == CodepointClass::kLetter);
  CHECK(ClassifyCodepoint(U'\u65e5') == CodepointClass::kLetter);  // 日
  CHECK(ClassifyCodepoint(U'\u03a9') == CodepointClass::kLetter);  // Ω
  CHECK(ClassifyCodepoint(U'7') == CodepointClass::kNumber);
  CHECK(ClassifyCodepoint(U'\u2167') == CodepointClass::kNumber);  // Ⅷ (Nl)
  CHECK(ClassifyCodepoint(U'\u0663') == CodepointClass::kNumber);  // Arabic-Indic 3
  CHECK(ClassifyCodepoint(U' ') == CodepointClass::kWhitespace);
  CHECK(ClassifyCodepoint(U'\n') == CodepointClass::kWhitespace);
  CHECK(ClassifyCodepoint(U'\u00a0') == CodepointClass::kWhitespace);
  CHECK(ClassifyCodepoint(U'\u3000') == CodepointClass::kWhitespace);
  CHECK(ClassifyCodepoint(U'.') == CodepointClass::kOther);
  CHECK(ClassifyCodepoint(U'\u0301') == CodepointClass::kOther);  // combining acute (Mn)
  CHECK(ClassifyCodepoint(U'\U0001F600') == CodepointClass::kOther);
  CHECK(ClassifyCodepoint(0x10FFFF) == CodepointClass::kOther);
  CHECK(ClassifyCodepoint(0) == CodepointClass::kOther);
}

TEST_CASE("gpt2 pre-tokenizer follows the regex", "[tokenizer]") {
  CHECK(Gpt2PreTokenize("Hello world") == Words{"Hello", " world"});
  CHECK(Gpt2PreTokenize("Hello  world") == Words{"Hello", " ", " world"});
  CHECK(Gpt2PreTokenize("I'm fine, you're") == Words{"I", "'m", " fine", ",", " you", "'re"});
  CHECK(Gpt2PreTokenize("we'll they've she'd it's 't") ==
        Words{"we", "'ll", " they", "'ve", " she", "'d", " it", "'s", " '", "t"});
  CHECK(Gpt2PreTokenize("DON'T") == Words{"DON", "'", "T"});
  CHECK(Gpt2PreTokenize("12345 67890") == Words{"12345", " 67890"});
  CHECK(Gpt2PreTokenize("3.14") == Words{"3", ".", "14"});
  CHECK(Gpt2PreTokenize("x=1+2") == Words{"x", "=", "1", "+", "2"});
  CHECK(Gpt2PreTokenize("a\r\nb") == Words{"a", "\r", "\n", "b"});
  CHECK(Gpt2PreTokenize("end.\n") == Words{"end", ".", "\n"});
  CHECK(Gpt2PreTokenize("   indented") == Words{"  ", " indented"});
  CHECK(Gpt2PreTokenize("x  ") == Words{"x", "  "});
  CHECK(Gpt2PreTokenize(" ") == Words{" "});
  CHECK(Gpt2PreTokenize("\n\nx") == Words{"\n", "\n", "x"});
  CHECK(Gpt2PreTokenize(" \n x") == Words{" \n", " x"});
  CHECK(Gpt2PreTokenize("Hello... !?") == Words{"Hello", "...", " !?"});
  CHECK(Gpt2PreTokenize("caf\u00e9 na\u00efve") == Words{"caf\u00e9", " na\u00efve"});
  CHECK(Gpt2PreTokenize("\u65e5\u672c\u8a9e") == Words{"\u65e5\u672c\u8a9e"});
  CHECK(Gpt2PreTokenize("emoji \U0001F600\U0001F680") == Words{"emoji", " \U0001F600\U0001F680"});
  CHECK(Gpt2PreTokenize("\u00a0non") == Words{"\u00a0", "non"});
  CHECK(Gpt2PreTokenize("abc123") == Words{"abc", "123"});
  CHECK(Gpt2PreTokenize("").empty());
}

TEST_CASE("gpt2 pre-tokenizer pieces cover the text", "[tokenizer]") {
  const std::vector<std::string> alphabet = {"a",  "Z",      "1",      " ",          " ",
                                             "\n", "\t",     "'",      "s",          "ll",
                                             ".",  "\u00e9", "\u00a0", "\U0001F600", "\u0663"};
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    std::string s;
    for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i)
      s += alphabet[rng() % alphabet.size()];
    std::string joined;
    for (std::string_view w : Gpt2PreTokenize(s)) {
      CHECK_FALSE(w.empty());
      joined += w;
    }
    CHECK(joined == s);
  }
}

TEST_CASE("gpt2 encodes by merge rank", "[tokenizer]") {
  const TestVocab v = MakeGpt2TestVocab();
  auto tok = Make(v.vocab);
  // "the" -> t + he ("t he" is no merge); " the" -> Ġt, he -> Ġthe.
  CHECK(Enc(*tok, "the the") == Ids{'t', v.Id("he"), v.Id("\u0120the")});
  // "hell": he (rank 1) merges before ll (rank 3), which leaves "e ll" unused.
  CHECK(Enc(*tok, "hell's") == Ids{v.Id("he"), v.Id("ll"), v.Id("'s")});
  CHECK(Enc(*tok, "ell") == Ids{v.Id("ell")});
  CHECK(Enc(*tok, "\n\n") == Ids{v.Id("\u010a\u010a")});
  CHECK(Enc(*tok, "\u00e9") == Ids{0xC3, 0xA9});
  CHECK(tok->Encode("").value() == Ids{});  // add_bos is false for this vocab
}

TEST_CASE("gpt2 special tokens", "[tokenizer]") {
  const TestVocab v = MakeGpt2TestVocab();
  auto tok = Make(v.vocab);
  const int32_t eot = v.Id("<|endoftext|>");
  CHECK(Enc(*tok, "a<|endoftext|>b", true) == Ids{'a', eot, 'b'});
  // As text: "a", "<|", "endoftext", "|>", "b", none of which has a merge.
  CHECK(Enc(*tok, "a<|endoftext|>b") ==
        Ids{'a', '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>', 'b'});
  CHECK(tok->Decode(Ids{'a', eot, 'b'}) == "ab");
}

TEST_CASE("gpt2 decode and round trip", "[tokenizer]") {
  const TestVocab v = MakeGpt2TestVocab();
  auto tok = Make(v.vocab);
  CHECK(tok->TokenToPiece(v.Id("\u0120the")) == " the");
  CHECK(tok->TokenToPiece(0x0A) == "\n");
  CHECK(tok->TokenToPiece(0xC3) == "\xC3");
  CHECK(tok->Decode(Ids{0xC3}) == "\uFFFD");
  CHECK(tok->Decode(Ids{v.Id("\u0120t"), v.Id("he")}) == " the");  // no prefix removal
  const std::vector<std::string> alphabet = {"t",  "h",      "e",          "l",  "'", "s",     " ",
                                             "\n", "\u00e9", "\U0001F600", "\t", "7", "\u00a0"};
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    std::string s;
    for (int i = 0, n = static_cast<int>(rng() % 24); i < n; ++i)
      s += alphabet[rng() % alphabet.size()];
    CHECK(tok->Decode(Enc(*tok, s)) == s);
  }
}

TEST_CASE("gpt2 vocab validation", "[tokenizer]") {
  TestVocab v = MakeGpt2TestVocab();
  v.vocab.pre = "no-such-pre";
  auto r = Tokenizer::Create(v.vocab);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("tokenizer.ggml.pre") && Catch::Contains("\"no-such-pre\"") &&
                 Catch::Contains("\"gpt-2\"") && Catch::Contains("\"default\"") &&
                 Catch::Contains("\"qwen2\"") && Catch::Contains("\"deepseek-v3\""));
  v.vocab.pre = "qwen2";
  CHECK(Tokenizer::Create(v.vocab).ok());
  v.vocab.pre = "default";
  CHECK(Tokenizer::Create(v.vocab).ok());
  v.vocab.pre = "";
  CHECK(Tokenizer::Create(v.vocab).ok());

  for (const char* bad : {"nospace", "h ", " h", "q q", "h e e"}) {
    TestVocab w = MakeGpt2TestVocab();
    w.vocab.merges[2] = bad;
    auto rw = Tokenizer::Create(w.vocab);
    REQUIRE_FALSE(rw.ok());
    CHECK_THAT(std::string(rw.status().message()), Catch::Contains("tokenizer.ggml.merges[2]"));
  }
}

}  // namespace
}  // namespace odmoe
