// The tokenizers against golden ids from SentencePiece (models/tokenizer.model
// as stored in models/tiny-mixtral-f16.gguf) and Hugging Face tokenizers (the
// GPT-2 fixture), written by scripts/make_tiny_model.py. These files ship
// with the repository: a missing file fails the test.
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "encode_helper.h"
#include "gguf/gguf_reader.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

using Ids = std::vector<int32_t>;
using test::SourcePath;

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& relative) {
  auto file = GgufFile::Open(SourcePath(relative));
  INFO(relative << ": " << file.status());
  REQUIRE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  INFO(tok.status());
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

nlohmann::json LoadJson(const std::string& relative) {
  std::ifstream in(SourcePath(relative));
  INFO("missing golden file " << relative);
  REQUIRE(in.good());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_array());
  REQUIRE(j.size() > 10);
  return j;
}

TEST_CASE("golden SentencePiece ids", "[tokenizer][golden]") {
  auto tok = LoadTokenizer("models/tiny-mixtral-f16.gguf");
  const nlohmann::json golden = LoadJson("tests/data/golden/tokenizer_spm.json");
  for (const auto& e : golden) {
    const std::string text = e.at("text");
    INFO("text: \"" << text << "\"");
    const Ids want = e.at("ids").get<Ids>();  // SentencePiece, with BOS
    CHECK(tok->Encode(text).value() == want);
    CHECK(tok->Decode(want) == e.at("decoded").get<std::string>());
  }
}

TEST_CASE("golden SentencePiece with parse_special (HF slow, legacy)", "[tokenizer][golden]") {
  auto tok = LoadTokenizer("models/tiny-mixtral-f16.gguf");
  // transformers' sentencepiece tokenizer (legacy=True) on models/tokenizer.model:
  // special token texts become their ids, the text after one gets a dummy prefix.
  CHECK(test::Enc(*tok, "text with <s> inside", false, true) ==
        Ids{714, 820, 372, 1955, 1, 266, 1414, 554});
  CHECK(test::Enc(*tok, "a</s>b", false, true) == Ids{261, 2, 275});
  CHECK(test::Enc(*tok, "Hello <s>world</s>", false, true) == Ids{382, 489, 1958, 1955, 1, 723, 2});
  CHECK(test::Enc(*tok, "<s> x", false, true) == Ids{1, 266, 2001});
  CHECK(test::Enc(*tok, "<s>  x", false, true) == Ids{1, 1424, 2001});
  CHECK(test::Enc(*tok, "<unk>", false, true) == Ids{0});
  // Without parse_special the same texts are plain text.
  CHECK(test::Enc(*tok, "<s>", true, false) == Ids{1, 486, 1963, 2020});
}

TEST_CASE("golden GPT-2 ids", "[tokenizer][golden]") {
  auto tok = LoadTokenizer("tests/data/gpt2-tokenizer.gguf");
  const nlohmann::json golden = LoadJson("tests/data/golden/tokenizer_gpt2.json");
  const int32_t eot = tok->TokenId("<|endoftext|>");
  REQUIRE(eot >= 0);
  for (const auto& e : golden) {
    const std::string text = e.at("text");
    INFO("text: \"" << text << "\"");
    const Ids want = e.at("ids").get<Ids>();  // HF tokenizers: added tokens are matched
    CHECK(test::Enc(*tok, text, true, true) == want);
    if (e.contains("ids_special_as_text")) {
      CHECK(test::Enc(*tok, text, true, false) == e.at("ids_special_as_text").get<Ids>());
    }
    // HF decodes <|endoftext|> as its text; Decode skips control tokens.
    std::string decoded = e.at("decoded");
    for (size_t p; (p = decoded.find("<|endoftext|>")) != std::string::npos;) decoded.erase(p, 13);
    CHECK(tok->Decode(want) == decoded);
  }
}

std::string HeldOutText(size_t bytes) {
  std::ifstream in(SourcePath("tests/data/heldout.txt"));
  REQUIRE(in.good());
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(!all.empty());
  std::string text;
  while (text.size() < bytes) text += all;
  text.resize(bytes);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text;
}

TEST_CASE("100 KB of text tokenizes fast and round-trips", "[tokenizer][golden]") {
  const std::string text = HeldOutText(100 * 1024);
  const std::string model =
      GENERATE("models/tiny-mixtral-f16.gguf", "tests/data/gpt2-tokenizer.gguf");
  {
    auto tok = LoadTokenizer(model);
    const auto t0 = std::chrono::steady_clock::now();
    const Ids ids = test::Enc(*tok, text, false, false);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    INFO(model << ": " << ids.size() << " tokens in " << ms << " ms");
    CHECK(ms < 1000);
    CHECK(ids.size() > text.size() / 8);
    CHECK(tok->Decode(ids) == text);
    // One long run without spaces: the merge loop must stay O(n log n).
    const std::string run(100 * 1024, 'e');
    const auto t1 = std::chrono::steady_clock::now();
    CHECK(tok->Decode(test::Enc(*tok, run, false, false)) == run);
    CHECK(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count() <
          1000);
  }
}

TEST_CASE("real vocabs: streaming decode of random ids", "[tokenizer][golden]") {
  const std::string model =
      GENERATE("models/tiny-mixtral-f16.gguf", "tests/data/gpt2-tokenizer.gguf");
  {
    auto tok = LoadTokenizer(model);
    std::mt19937 rng(99);
    for (int iter = 0; iter < 200; ++iter) {
      Ids ids;
      for (int i = 0, n = static_cast<int>(rng() % 20); i < n; ++i) {
        ids.push_back(static_cast<int32_t>(rng() % tok->n_vocab()));
      }
      IncrementalDecoder dec(*tok);
      std::string streamed;
      for (int32_t id : ids) streamed += dec.Push(id);
      streamed += dec.Flush();
      CHECK(streamed == tok->Decode(ids));
    }
  }
}

}  // namespace
}  // namespace odmoe
