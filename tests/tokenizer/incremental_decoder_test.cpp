// IncrementalDecoder: the concatenation of its outputs equals Decode(), for
// random id sequences that split multi-byte characters across byte tokens.
#include <catch2/catch.hpp>
#include <random>

#include "gguf/gguf_reader.h"
#include "test_paths.h"
#include "test_vocabs.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

void CheckStreamingMatchesDecode(const Tokenizer& tok, const std::vector<int32_t>& pool,
                                 uint32_t seed) {
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<int32_t> ids;
    for (int i = 0, n = static_cast<int>(rng() % 16); i < n; ++i)
      ids.push_back(pool[rng() % pool.size()]);
    IncrementalDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = dec.Push(id);
      CHECK_FALSE(FindInvalidUtf8(piece).has_value());  // never a split character
      streamed += piece;
    }
    streamed += dec.Flush();
    CHECK(streamed == tok.Decode(ids));
  }
}

TEST_CASE("incremental decoder equals Decode (SentencePiece)", "[tokenizer]") {
  const test::TestVocab v = test::MakeSpmTestVocab();
  auto tok = Tokenizer::Create(v.vocab).value();
  std::vector<int32_t> pool = {
      0, 1, 2, -1, 9999, v.Id("\u2581"), v.Id("\u2581the"), v.Id("he"), v.Id("\u4e2d"), v.Id("xy")};
  for (int b : {0x20, 0x41, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xFF}) {
    pool.push_back(3 + b);
    pool.push_back(3 + b);  // bytes twice as likely, to complete sequences often
  }
  CheckStreamingMatchesDecode(*tok, pool, 17);
}

TEST_CASE("incremental decoder equals Decode (GPT-2)", "[tokenizer]") {
  const test::TestVocab v = test::MakeGpt2TestVocab();
  auto tok = Tokenizer::Create(v.vocab).value();
  std::vector<int32_t> pool = {v.Id("<|endoftext|>"), v.Id("\u0120the"), 'a', ' ', -3};
  for (int b : {0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xFF}) pool.push_back(b);
  CheckStreamingMatchesDecode(*tok, pool, 23);
}

TEST_CASE("incremental decoder holds back split characters", "[tokenizer]") {
  const test::TestVocab v = test::MakeSpmTestVocab();
  auto tok = Tokenizer::Create(v.vocab).value();
  IncrementalDecoder dec(*tok);
  CHECK(dec.Push(1).empty());                   // <s>
  CHECK(dec.Push(v.Id("\u2581the")) == "the");  // dummy prefix removed
  CHECK(dec.Push(3 + 0xE2).empty());
  CHECK(dec.Push(3 + 0x82).empty());
  CHECK(dec.Push(3 + 0xAC) == "\u20ac");
  CHECK(dec.Push(3 + 0xC3).empty());
  CHECK(dec.Flush() == "\uFFFD");
  CHECK(dec.Push(v.Id("\u2581the")) == " the");  // continues the same text
}

}  // namespace
}  // namespace odmoe

namespace odmoe {

TEST_CASE("IncrementalDecoder: a continuation keeps the first piece's space", "[tokenizer]") {
  auto file = GgufFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf"));
  REQUIRE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  REQUIRE(tok.ok());
  auto ids = (*tok)->Encode("The cat sat", {.add_bos = false});
  REQUIRE(ids.ok());
  IncrementalDecoder fresh(**tok), continuation(**tok, /*continues_text=*/true);
  std::string a, b;
  for (int32_t id : *ids) {
    a += fresh.Push(id);
    b += continuation.Push(id);
  }
  CHECK(a + fresh.Flush() == "The cat sat");
  CHECK(b + continuation.Flush() == " The cat sat");
}

}  // namespace odmoe
