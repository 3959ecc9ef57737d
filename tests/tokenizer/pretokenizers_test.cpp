// The pre-tokenizer table (common/tokenizer/pretokenizers.h): golden splits
// from Hugging Face tokenizers for every name (written by
// scripts/fixtures/make_pretokenizer_splits.py), the "gpt-2" entry against the
// former hand-written matcher, unknown names, invalid UTF-8 and long inputs.
#include "tokenizer/pretokenizers.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "gpt2_pretokenizer_oracle.h"
#include "test_paths.h"
#include "test_vocabs.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

using Pieces = std::vector<std::string_view>;

std::unique_ptr<PreTokenizer> Make(std::string_view name) {
  auto p = PreTokenizer::Create(name);
  INFO(name << ": " << p.status());
  REQUIRE(p.ok());
  return std::move(p).value();
}

// Every name SupportedNames() lists.
std::set<std::string> TableNames() {
  std::set<std::string> names;
  const std::string list = PreTokenizer::SupportedNames();
  for (size_t open = list.find('"'); open != std::string::npos;) {
    const size_t close = list.find('"', open + 1);
    names.insert(list.substr(open + 1, close - open - 1));
    open = list.find('"', close + 1);
  }
  return names;
}

void CheckCovers(const Pieces& pieces, std::string_view text) {
  std::string joined;
  for (std::string_view p : pieces) {
    CHECK_FALSE(p.empty());
    joined += p;
  }
  CHECK(joined == text);
}

TEST_CASE("pre-tokenizers split as Hugging Face tokenizers does", "[tokenizer][pretokenizer]") {
  std::ifstream in(test::SourcePath("tests/data/pretokenizer_splits.json"));
  REQUIRE(in.good());
  const nlohmann::json golden = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE(golden.is_object());
  const std::vector<std::string> texts = golden.at("texts");
  REQUIRE(texts.size() > 20);
  std::set<std::string> covered;
  for (const auto& [name, per_text] : golden.at("pieces").items()) {
    covered.insert(name);
    auto pre = Make(name);
    CHECK(pre->name() == name);
    REQUIRE(per_text.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      INFO("pre-tokenizer " << name << ", text #" << i << ": \"" << texts[i] << "\"");
      const std::vector<std::string> want = per_text[i];
      auto got = pre->Split(texts[i]);
      REQUIRE(got.ok());
      REQUIRE(got->size() == want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        INFO("piece " << k);
        CHECK((*got)[k] == want[k]);
      }
    }
  }
  // Every table entry has golden splits.
  CHECK(covered == TableNames());
}

TEST_CASE("gpt-2 entry splits exactly as the former hand-written matcher",
          "[tokenizer][pretokenizer]") {
  auto pre = Make("gpt-2");
  // Every Unicode scalar value, in runs of 48 with separators that exercise
  // the letter / number / space / contraction alternatives around it.
  const std::vector<std::string> seps = {" ", "a", "1", "'s", "  ", "\n", "."};
  std::string text;
  size_t texts = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    AppendUtf8(cp, &text);
    text += seps[cp % seps.size()];
    AppendUtf8(cp, &text);
    if (cp % 48 == 47 || cp == 0x10FFFF) {
      auto got = pre->Split(text);
      REQUIRE(got.ok());
      if (*got != test::Gpt2PreTokenize(text)) {
        for (char32_t c = cp - cp % 48; c <= cp; ++c) {  // find the code point
          std::string one;
          AppendUtf8(c, &one);
          one += seps[c % seps.size()];
          AppendUtf8(c, &one);
          INFO("U+" << std::hex << static_cast<uint32_t>(c));
          CHECK(pre->Split(one).value() == test::Gpt2PreTokenize(one));
        }
        FAIL("differs around U+" << std::hex << static_cast<uint32_t>(cp));
      }
      text.clear();
      ++texts;
    }
  }
  CHECK(texts > 20000);
  // Random mixtures (seeded) of the classes' interesting members.
  const std::vector<std::string> alphabet = {
      "a",      "Z",      "1",      " ",      "  ",         "\n",     "\r",     "\t",
      "'",      "s",      "ll",     "re",     "D",          ".",      "!",      "\u00e9",
      "\u00a0", "\u0085", "\u3000", "\u2028", "\U0001F600", "\u0663", "\u0301", "\u65e5"};
  std::mt19937 rng(2026);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    for (int i = 0, n = static_cast<int>(rng() % 30); i < n; ++i) {
      s += alphabet[rng() % alphabet.size()];
    }
    INFO("text \"" << s << "\"");
    auto got = pre->Split(s);
    REQUIRE(got.ok());
    CHECK(*got == test::Gpt2PreTokenize(s));
  }
}

TEST_CASE("unknown pre-tokenizer names are a clear error", "[tokenizer][pretokenizer]") {
  auto r = PreTokenizer::Create("llama-3-typo");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(r.status().message());
  CHECK_THAT(msg, Catch::Contains("\"llama-3-typo\"") && Catch::Contains("\"llama-bpe\"") &&
                      Catch::Contains("\"gpt-4o\"") && Catch::Contains("\"deepseek-llm\""));
  CHECK_FALSE(PreTokenizer::IsSupported("GPT-2"));  // names are case-sensitive
  CHECK(PreTokenizer::IsSupported(""));             // no key: "default"
  CHECK(Make("")->name() == "default");

  // Through the GGUF reader's checks: the error names the key as well.
  test::TestVocab v = test::MakeGpt2TestVocab();
  v.vocab.pre = "jais-typo";
  auto tok = Tokenizer::Create(v.vocab);
  REQUIRE_FALSE(tok.ok());
  CHECK_THAT(std::string(tok.status().message()), Catch::Contains("tokenizer.ggml.pre") &&
                                                      Catch::Contains("\"jais-typo\"") &&
                                                      Catch::Contains("\"qwen2\""));
}

TEST_CASE("pre-tokenizers reject invalid UTF-8 without crashing", "[tokenizer][pretokenizer]") {
  std::vector<std::unique_ptr<PreTokenizer>> all;
  for (const std::string& name : TableNames()) all.push_back(Make(name));
  for (const auto& pre : all) {
    for (const std::string& bad :
         {std::string("ab\xFF"
                      "c"),
          std::string("ab\xC3"), std::string("ab\xED\xA0\x80"), std::string("ab\xC0\x80"),
          std::string("ab\xF4\x90\x80\x80"), std::string("ab\x80")}) {
      auto r = pre->Split(bad);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(r.status().message()), Catch::Contains("byte 2"));
    }
  }
  // Random bytes (seeded): an error exactly when the text is invalid, pieces
  // covering the text otherwise.
  std::mt19937 rng(13);
  const std::string fragments[] = {"a",
                                   " ",
                                   "1",
                                   "\n",
                                   "\xC3\xA9",
                                   "\xE6\x97\xA5",
                                   "\xC3",
                                   "\xFF",
                                   "\x80",
                                   "\xF0\x9F\x98\x80",
                                   "\xED\xA0\x80",
                                   "'s"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    for (int i = 0, n = static_cast<int>(rng() % 12); i < n; ++i) {
      s += fragments[rng() % std::size(fragments)];
    }
    const bool valid = !FindInvalidUtf8(s).has_value();
    for (const auto& pre : all) {
      auto r = pre->Split(s);
      REQUIRE(r.ok() == valid);
      if (valid) CheckCovers(*r, s);
    }
  }
  // The tokenizer keeps rejecting invalid text before it is split, with the offset.
  test::TestVocab v = test::MakeGpt2TestVocab();
  v.vocab.pre = "deepseek-v3";
  auto tok = Tokenizer::Create(v.vocab).value();
  auto r = tok->Encode("ab\xC3");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("offset 2"));
}

TEST_CASE("pre-tokenizers handle long runs", "[tokenizer][pretokenizer]") {
  const size_t n = 1 << 20;
  const std::vector<std::string> texts = {std::string(n, 'A'), std::string(n, 'a'),
                                          std::string(n, ' ') + "x", std::string(n, '7'),
                                          std::string(n, '!')};
  for (const std::string& name : TableNames()) {
    auto pre = Make(name);
    for (const std::string& t : texts) {
      INFO(name << " on " << t.size() << " bytes of '" << t[0] << "'");
      auto r = pre->Split(t);
      REQUIRE(r.ok());
      CheckCovers(*r, t);
    }
  }
}

TEST_CASE("tokenizer.json: backslash-s becomes Unicode White_Space", "[tokenizer][pretokenizer]") {
  const std::string ws =
      R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
  CHECK(ToPcre2Pattern(R"(\s+(?!\S))").value() == "[" + ws + "]+(?![^" + ws + "])");
  CHECK(ToPcre2Pattern(R"([^\s\p{L}])").value() == "[^" + ws + R"(\p{L}])");
  CHECK(ToPcre2Pattern(R"(\\s[\]\s])").value() == R"(\\s[\])" + ws + "]");
  CHECK(ToPcre2Pattern(R"([]\s])").value() == "[]" + ws + "]");
  CHECK_FALSE(ToPcre2Pattern(R"([\S])").ok());
  // U+0085 (NEL) is White_Space, U+180E (Mongolian vowel separator) is not
  // (PCRE2's own \s says otherwise for U+180E).
  auto llama3 = Make("llama-bpe");
  CHECK(llama3->Split("!\u0085").value() == Pieces{"!", "\u0085"});
  CHECK(llama3->Split("!\u180e").value() == Pieces{"!\u180e"});
  CHECK(llama3->Split("a\u180e\u180e").value() == Pieces{"a", "\u180e\u180e"});
}

TEST_CASE("one pre-tokenizer splits on several threads at once", "[tokenizer][pretokenizer]") {
  auto pre = Make("gpt-4o");
  std::string text;
  std::mt19937 rng(5);
  const std::vector<std::string> words = {"Hello", " world",       "'s", " 12345",    "\n\n",
                                          "  ",    "\u65e5\u672c", "!?", " caf\u00e9"};
  for (int i = 0; i < 20000; ++i) text += words[rng() % words.size()];
  const Pieces want = pre->Split(text).value();
  std::vector<int> same(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) same[t] += pre->Split(text).value() == want ? 1 : 0;
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(same == std::vector<int>(4, 20));
}

TEST_CASE("the tokenizer uses the vocab's pre-tokenizer", "[tokenizer][pretokenizer]") {
  // The merges "\u010a \u010a" (two newlines) and "' s" apply only inside one
  // piece: gpt-2 keeps "\n\n" and "'s" whole, deepseek-llm cuts each newline
  // and puts "'" (punctuation) and "s" (letters) in different pieces.
  const auto encode = [](const std::string& pre, std::string_view text) {
    test::TestVocab v = test::MakeGpt2TestVocab();
    v.vocab.pre = pre;
    return Tokenizer::Create(v.vocab).value()->Encode(text).value();
  };
  const test::TestVocab v = test::MakeGpt2TestVocab();
  using Ids = std::vector<int32_t>;
  CHECK(encode("gpt-2", "\n\n") == Ids{v.Id("\u010a\u010a")});
  CHECK(encode("llama-bpe", "\n\n") == Ids{v.Id("\u010a\u010a")});
  CHECK(encode("deepseek-llm", "\n\n") == Ids{'\n', '\n'});
  CHECK(encode("gpt-2", "it's") == Ids{'i', 't', v.Id("'s")});
  CHECK(encode("qwen2", "it's") == Ids{'i', 't', v.Id("'s")});
  CHECK(encode("deepseek-llm", "it's") == Ids{'i', 't', '\'', 's'});
}

}  // namespace
}  // namespace odmoe
