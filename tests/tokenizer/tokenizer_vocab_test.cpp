// ReadTokenizerVocab / Tokenizer::FromGguf over GGUF files written with
// GgufWriter, and their errors for bad metadata.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "test_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace odmoe {
namespace {

using Ids = std::vector<int32_t>;

std::string TempPath() {
  static std::atomic<int> counter{0};
  return (std::filesystem::temp_directory_path() /
          ("odmoe_tok_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".gguf"))
      .string();
}

void WriteSpmMetadata(const test::TestVocab& v, GgufWriter* w) {
  std::vector<int32_t> types;
  for (TokenType t : v.vocab.token_types) types.push_back(static_cast<int32_t>(t));
  w->SetMetadata("general.architecture", GgufValue::String("llama"));
  w->SetMetadata("tokenizer.ggml.model", GgufValue::String("llama"));
  w->SetMetadata("tokenizer.ggml.tokens", GgufValue::StringArray(v.vocab.tokens));
  w->SetMetadata("tokenizer.ggml.scores", GgufValue::F32Array(v.vocab.scores));
  w->SetMetadata("tokenizer.ggml.token_type", GgufValue::I32Array(types));
  w->SetMetadata("tokenizer.ggml.bos_token_id", GgufValue::U32(1));
  w->SetMetadata("tokenizer.ggml.eos_token_id", GgufValue::U32(2));
  w->SetMetadata("tokenizer.ggml.unknown_token_id", GgufValue::U32(0));
  w->SetMetadata("tokenizer.ggml.add_bos_token", GgufValue::Bool(true));
  w->SetMetadata("tokenizer.ggml.add_eos_token", GgufValue::Bool(false));
}

// Writes the hand-made SentencePiece vocab, lets `edit` change the metadata,
// and reads the vocab back.
absl::StatusOr<TokenizerVocab> RoundTrip(const std::function<void(GgufWriter*)>& edit) {
  const test::TestVocab v = test::MakeSpmTestVocab();
  GgufWriter w;
  WriteSpmMetadata(v, &w);
  edit(&w);
  const std::string path = TempPath();
  absl::Status s = w.WriteFile(path);
  if (!s.ok()) return s;
  auto file = GgufFile::Open(path);
  std::filesystem::remove(path);
  if (!file.ok()) return file.status();
  return ReadTokenizerVocab(**file);
}

std::string ErrorOf(const std::function<void(GgufWriter*)>& edit) {
  auto r = RoundTrip(edit);
  if (r.ok()) return "ok";
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST_CASE("vocab reads back from GGUF", "[tokenizer]") {
  const test::TestVocab v = test::MakeSpmTestVocab();
  auto r = RoundTrip([](GgufWriter*) {});
  REQUIRE(r.ok());
  CHECK(r->model == TokenizerModel::kSentencePiece);
  CHECK(r->tokens == v.vocab.tokens);
  CHECK(r->scores == v.vocab.scores);
  CHECK(r->token_types == v.vocab.token_types);
  CHECK(r->bos_id == 1);
  CHECK(r->eos_id == 2);
  CHECK(r->unk_id == 0);
  CHECK(r->pad_id == -1);
  CHECK(r->add_bos);
  CHECK_FALSE(r->add_eos);
  CHECK(r->add_space_prefix);
  auto tok = Tokenizer::Create(*r);
  REQUIRE(tok.ok());
  CHECK((*tok)->Encode("the").value() == Ids{1, v.Id("\u2581the")});

  auto no_prefix = RoundTrip([](GgufWriter* w) {
    w->SetMetadata("tokenizer.ggml.add_space_prefix", GgufValue::Bool(false));
    w->SetMetadata("tokenizer.ggml.padding_token_id", GgufValue::I32(-1));
  });
  REQUIRE(no_prefix.ok());
  CHECK_FALSE(no_prefix->add_space_prefix);
  CHECK(no_prefix->pad_id == -1);
}

TEST_CASE("vocab errors name the key", "[tokenizer]") {
  using Catch::Contains;
  const auto set = [](std::string key, GgufValue value) {
    return [key, value](GgufWriter* w) { w->SetMetadata(key, value); };
  };
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.model", GgufValue::String("bert"))),
             Contains("tokenizer.ggml.model") && Contains("llama") && Contains("gpt2"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.model", GgufValue::U32(1))),
             Contains("tokenizer.ggml.model"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.tokens", GgufValue::U32(1))),
             Contains("tokenizer.ggml.tokens"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.tokens", GgufValue::StringArray({}))),
             Contains("tokenizer.ggml.tokens"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.scores", GgufValue::F32Array({1.0f, 2.0f}))),
             Contains("tokenizer.ggml.scores"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.scores", GgufValue::String("x"))),
             Contains("tokenizer.ggml.scores"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.token_type", GgufValue::I32Array({1, 1, 1}))),
             Contains("tokenizer.ggml.token_type"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.bos_token_id", GgufValue::U32(100000))),
             Contains("tokenizer.ggml.bos_token_id"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.eos_token_id", GgufValue::String("2"))),
             Contains("tokenizer.ggml.eos_token_id"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.unknown_token_id", GgufValue::I32(-7))),
             Contains("tokenizer.ggml.unknown_token_id"));
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.add_bos_token", GgufValue::U32(1))),
             Contains("tokenizer.ggml.add_bos_token"));

  // A token type outside 1..6, and a byte token that is not spelled <0xNN>.
  test::TestVocab v = test::MakeSpmTestVocab();
  std::vector<int32_t> types(v.vocab.tokens.size(), 1);
  types[5] = 9;
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.token_type", GgufValue::I32Array(types))),
             Contains("tokenizer.ggml.token_type[5]"));
  types[5] = 6;
  CHECK(ErrorOf(set("tokenizer.ggml.token_type", GgufValue::I32Array(types))) == "ok");
  types[v.Id("he")] = 6;
  CHECK_THAT(ErrorOf(set("tokenizer.ggml.token_type", GgufValue::I32Array(types))),
             Contains("<0xNN>"));
}

TEST_CASE("vocab: missing tokenizer, gpt2 defaults and merges", "[tokenizer]") {
  GgufWriter w;
  w.SetMetadata("general.architecture", GgufValue::String("llama"));
  const std::string path = TempPath();
  REQUIRE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  std::filesystem::remove(path);
  REQUIRE(file.ok());
  auto r = ReadTokenizerVocab(**file);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("tokenizer.ggml.model"));
  CHECK_FALSE(Tokenizer::FromGguf(**file).ok());

  const test::TestVocab g = test::MakeGpt2TestVocab();
  const auto write_gpt2 = [&](bool with_merges, const std::string& pre = "gpt-2") {
    GgufWriter gw;
    gw.SetMetadata("tokenizer.ggml.model", GgufValue::String("gpt2"));
    gw.SetMetadata("tokenizer.ggml.pre", GgufValue::String(pre));
    gw.SetMetadata("tokenizer.ggml.tokens", GgufValue::StringArray(g.vocab.tokens));
    if (with_merges)
      gw.SetMetadata("tokenizer.ggml.merges", GgufValue::StringArray(g.vocab.merges));
    const std::string p = TempPath();
    REQUIRE(gw.WriteFile(p).ok());
    auto f = GgufFile::Open(p);
    std::filesystem::remove(p);
    REQUIRE(f.ok());
    return std::move(f).value();
  };
  auto with = write_gpt2(true);
  auto tok = Tokenizer::FromGguf(*with);
  REQUIRE(tok.ok());
  CHECK_FALSE((*tok)->vocab().add_bos);
  CHECK((*tok)->Encode("the the").value() == Ids{'t', g.Id("he"), g.Id("\u0120the")});
  auto without = write_gpt2(false);
  auto bad = ReadTokenizerVocab(*without);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("tokenizer.ggml.merges"));

  // tokenizer.ggml.pre picks the pre-tokenizer; an unknown one names key, value and the table.
  auto qwen2 = write_gpt2(true, "qwen2");
  CHECK(Tokenizer::FromGguf(*qwen2).ok());
  auto unknown = write_gpt2(true, "chatglm-bpe-typo");
  auto bad_pre = Tokenizer::FromGguf(*unknown);
  REQUIRE_FALSE(bad_pre.ok());
  CHECK_THAT(std::string(bad_pre.status().message()),
             Catch::Contains("tokenizer.ggml.pre") && Catch::Contains("\"chatglm-bpe-typo\"") &&
                 Catch::Contains("\"deepseek-llm\"") && Catch::Contains("\"gpt-4o\""));
}

}  // namespace
}  // namespace odmoe
