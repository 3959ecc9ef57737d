// The generation request's field table (engine/request_fields.h): each
// field's bounds accepted at their edges and refused just past them, with one
// message shape naming the field and the bound; the command-line flags made
// from it; and the prompt's checks, all in PreparePrompt.
#include "engine/request_fields.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "test_paths.h"
#include "util/cli_args.h"

namespace odmoe {
namespace {

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// A value just past `bound` (outward: below a minimum, above a maximum).
double Past(const RequestField& f, double bound, bool below) {
  if (f.type == RequestFieldType::kInt) return below ? bound - 1 : bound + 1;
  return below ? bound - 0.01 : bound + 0.01;
}

TEST_CASE("request fields: each bound accepted at its edge, refused past it", "[request]") {
  for (const RequestField& f : RequestFields()) {
    INFO(f.name);
    if (f.type == RequestFieldType::kBool || f.type == RequestFieldType::kUInt64) {
      CHECK(CheckRequestField(f, 0).ok());
      CHECK(CheckRequestField(f, 1).ok());
      continue;
    }
    const std::string name(f.name);
    REQUIRE(f.min < f.max);
    CHECK(CheckRequestField(f, f.max).ok());
    const absl::Status above = CheckRequestField(f, Past(f, f.max, false));
    CHECK(absl::IsInvalidArgument(above));
    const std::string max_text =
        f.max == 2147483647 ? "2147483647" : std::to_string(static_cast<int64_t>(f.max));
    CHECK(Message(above) == name + ": must be at most " + max_text);
    const absl::Status below = CheckRequestField(f, Past(f, f.min, true));
    CHECK(absl::IsInvalidArgument(below));
    const std::string min_text = std::to_string(static_cast<int64_t>(f.min));
    if (f.min_exclusive) {
      CHECK_FALSE(CheckRequestField(f, f.min).ok());
      CHECK(Message(CheckRequestField(f, f.min)) == name + ": must be greater than " + min_text);
      CHECK(CheckRequestField(f, f.min + 1e-6).ok());
    } else {
      CHECK(CheckRequestField(f, f.min).ok());
      CHECK(Message(below) == name + ": must be at least " + min_text);
    }
    // NaN, and a fraction for an integer: the type error with the range.
    const absl::Status nan = CheckRequestField(f, NAN);
    CHECK(absl::IsInvalidArgument(nan));
    CHECK(Message(nan) == Message(RequestFieldTypeError(f)));
    CHECK(Message(nan).rfind(name + ": expected ", 0) == 0);
    if (f.type == RequestFieldType::kInt) {
      CHECK(Message(CheckRequestField(f, f.min + 0.5)) == Message(RequestFieldTypeError(f)));
    }
  }
}

TEST_CASE("request fields: the bounds a user of the reference API expects", "[request]") {
  auto check = [](const char* name, double v) {
    return Message(CheckRequestField(RequestFieldNamed(name), v));
  };
  CHECK(check("temperature", 2.0) == "");
  CHECK(check("temperature", 2.5) == "temperature: must be at most 2");
  CHECK(check("temperature", -0.1) == "temperature: must be at least 0");
  CHECK(check("top_p", 0) == "top_p: must be greater than 0");
  CHECK(check("top_p", 1.5) == "top_p: must be at most 1");
  CHECK(check("max_tokens", 0) == "max_tokens: must be at least 1");
  CHECK(check("max_tokens", 1e18) == "max_tokens: must be at most 16777216");
  CHECK(check("logprobs", 21) == "logprobs: must be at most 20");
  CHECK(check("top_k", -1) == "");  // vLLM's "all"
  CHECK(check("top_k", -2) == "top_k: must be at least -1");
  CHECK(check("presence_penalty", -2) == "");
  CHECK(check("frequency_penalty", 2.5) == "frequency_penalty: must be at most 2");
  CHECK(check("repetition_penalty", 0) == "repetition_penalty: must be greater than 0");
  CHECK(check("min_p", 1.5) == "min_p: must be at most 1");
  CHECK(check("typical_p", 0) == "typical_p: must be greater than 0");
  CHECK(check("repeat_last_n", -2) == "repeat_last_n: must be at least -1");
  CHECK(check("min_tokens", -1) == "min_tokens: must be at least 0");
  CHECK(Message(RequestFieldTypeError(RequestFieldNamed("temperature"))) ==
        "temperature: expected a number from 0 to 2");
  CHECK(Message(RequestFieldTypeError(RequestFieldNamed("top_p"))) ==
        "top_p: expected a number greater than 0 and at most 1");
  CHECK(Message(RequestFieldTypeError(RequestFieldNamed("max_tokens"), "max_completion_tokens")) ==
        "max_completion_tokens: expected an integer from 1 to 16777216");
  CHECK(Message(RequestFieldTypeError(RequestFieldNamed("ignore_eos"))) ==
        "ignore_eos: expected true or false");
}

TEST_CASE("request fields: a built request is validated field by field", "[request]") {
  CHECK(ValidateRequestFields(GenerateRequest{}).ok());  // every default, logprobs -1 included
  GenerateRequest r;
  const RequestField& t = RequestFieldNamed("temperature");
  REQUIRE(SetRequestField(t, 0.5, &r).ok());
  CHECK(r.sampling.temperature == 0.5f);
  // Refused values are not stored.
  CHECK(Message(SetRequestField(t, 3, &r)) == "temperature: must be at most 2");
  CHECK(r.sampling.temperature == 0.5f);
  SetRequestFieldBits(RequestFieldNamed("seed"), ~uint64_t{0}, &r);
  CHECK(r.sampling.seed == ~uint64_t{0});
  CHECK(GetRequestFieldBits(RequestFieldNamed("seed"), r) == ~uint64_t{0});
  r.sampling.top_p = 0;
  CHECK(Message(ValidateRequestFields(r)) == "top_p: must be greater than 0");
  r.sampling.top_p = 1;
  r.logprobs = 21;
  CHECK(Message(ValidateRequestFields(r)) == "logprobs: must be at most 20");
  r.logprobs = 20;
  r.max_tokens = 0;
  CHECK(Message(ValidateRequestFields(r)) == "max_tokens: must be at least 1");
}

TEST_CASE("request fields: names are unique, flags follow them", "[request]") {
  std::set<std::string> names, flags;
  for (const RequestField& f : RequestFields()) {
    CHECK(names.insert(std::string(f.name)).second);
    CHECK(flags.insert(f.FlagName()).second);
    CHECK(&RequestFieldNamed(f.name) == &f);
    CHECK_FALSE(f.help.empty());
  }
  CHECK(FindRequestField("frobnicate") == nullptr);
  CHECK(RequestFieldNamed("top_p").FlagName() == "top-p");
  CHECK(RequestFieldNamed("max_tokens").FlagName() == "n");
}

TEST_CASE("request fields: the tools' flags set the request", "[request]") {
  GenerateRequest r;
  CliArgs args("tool", "test");
  AddRequestFlags(args, &r);
  std::vector<std::string> words = {"tool", "-n",      "8",   "--temperature",
                                    "0.5",  "--top-p", "0.9", "--top-k",
                                    "40",   "--seed",  "7",   "--ignore-eos"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  REQUIRE(args.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  CHECK(r.max_tokens == 8);
  CHECK(r.sampling.temperature == 0.5f);
  CHECK(r.sampling.top_p == 0.9f);
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.seed == 7);
  CHECK(r.ignore_eos);
  // Help names each field's default.
  CHECK(args.Help().find("(default 64)") != std::string::npos);
  CHECK(args.Help().find("--logprobs") == std::string::npos);  // not offered as a flag
}

// The tools' flags (AddRequestFlags) parsed from `words` into `r`.
absl::Status ParseRequestFlags(std::vector<std::string> words, GenerateRequest* r) {
  CliArgs args("tool", "test");
  AddRequestFlags(args, r);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return args.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST_CASE("request fields: the sampling chain's flags, lists included", "[request]") {
  GenerateRequest r;
  std::vector<std::string> words = {"tool",
                                    "--min-p=0.05",
                                    "--typical-p=0.9",
                                    "--presence-penalty=0.5",
                                    "--frequency-penalty=-0.5",
                                    "--repetition-penalty=1.1",
                                    "--repeat-last-n=-1",
                                    "--min-tokens=3",
                                    "--logit-bias=15=-100",
                                    "--logit-bias",
                                    R"({"7": 2.5, "8": -1})",
                                    "--stop-token-ids=4,5",
                                    "--stop-token-ids=6"};
  REQUIRE(ParseRequestFlags(words, &r).ok());
  CHECK(r.sampling.min_p == 0.05f);
  CHECK(r.sampling.typical_p == 0.9f);
  CHECK(r.sampling.presence_penalty == 0.5f);
  CHECK(r.sampling.frequency_penalty == -0.5f);
  CHECK(r.sampling.repetition_penalty == 1.1f);
  CHECK(r.sampling.repeat_last_n == -1);
  CHECK(r.min_tokens == 3);
  CHECK(r.sampling.logit_bias == std::map<int32_t, float>{{7, 2.5f}, {8, -1.0f}, {15, -100.0f}});
  CHECK(r.stop_token_ids == std::vector<int32_t>{4, 5, 6});
  CHECK(ValidateRequestFields(r).ok());
  // A value outside its bounds is the request's error, with the request's message.
  for (const char* bad : {"--logit-bias=3=150", "--logit-bias=-2=1"}) {
    GenerateRequest b;
    REQUIRE(ParseRequestFlags({"tool", bad}, &b).ok());
    CHECK(Message(ValidateRequestFields(b)).rfind("logit_bias: ", 0) == 0);
  }
  // Unparsable: the parser's error names the flag.
  for (const char* bad :
       {"--logit-bias=3", "--logit-bias=x=1", "--stop-token-ids=1,,2", "--logit-bias={\"a\": 1}"}) {
    GenerateRequest b;
    INFO(bad);
    CHECK(ParseRequestFlags({"tool", bad}, &b).message().find("invalid value") == 0);
  }
}

const Tokenizer& TinyTokenizer() {
  static const std::unique_ptr<GgufFile> file =
      std::move(*GgufFile::Open(test::SourcePath("models/tiny-mixtral-f16.gguf")));
  static const std::unique_ptr<Tokenizer> tok = std::move(*Tokenizer::FromGguf(*file));
  return *tok;
}

TEST_CASE("request fields: the prompt is checked in PreparePrompt", "[request]") {
  const Tokenizer& tok = TinyTokenizer();
  GenerateRequest r;
  r.max_tokens = 4;
  CHECK(Message(PreparePrompt(r, tok, 64).status()) == "prompt: must not be empty");
  r.prompt_ids = {1, tok.n_vocab()};
  CHECK(Message(PreparePrompt(r, tok, 64).status()) ==
        "prompt: token id " + std::to_string(tok.n_vocab()) + " outside the vocabulary [0, " +
            std::to_string(tok.n_vocab()) + ")");
  r.prompt_ids = {1, -3};
  CHECK(absl::IsInvalidArgument(PreparePrompt(r, tok, 64).status()));
  r.prompt_ids = {1, 2, 3};
  CHECK(PreparePrompt(r, tok, 64).value() == r.prompt_ids);
  CHECK(absl::IsOutOfRange(PreparePrompt(r, tok, 6).status()));  // 3 + 4 > 6
  CHECK(absl::IsOutOfRange(PreparePrompt(r, tok, 3).status()));  // the prompt fills it
  r.prompt_ids.clear();
  r.prompt = "caf\xc3";
  const absl::Status utf8 = PreparePrompt(r, tok, 64).status();
  CHECK(absl::IsInvalidArgument(utf8));
  CHECK(Message(utf8).rfind("prompt: ", 0) == 0);
  // The sampling's token ids are the vocabulary's.
  r.prompt = "Hi";
  CHECK(PreparePrompt(r, tok, 64).ok());
  r.sampling.logit_bias = {{tok.n_vocab(), 1.0f}};
  CHECK(Message(PreparePrompt(r, tok, 64).status()) ==
        "logit_bias: token id " + std::to_string(tok.n_vocab()) + " outside the vocabulary [0, " +
            std::to_string(tok.n_vocab()) + ")");
  r.sampling.logit_bias.clear();
  r.stop_token_ids = {tok.n_vocab() + 5};
  CHECK(Message(PreparePrompt(r, tok, 64).status()).rfind("stop_token_ids: token id ", 0) == 0);
  r.stop_token_ids.clear();
  r.prompt = "caf\xc3";
  // The fields first: a bad field with a bad prompt names the field.
  r.sampling.temperature = 9;
  CHECK(Message(PreparePrompt(r, tok, 64).status()) == "temperature: must be at most 2");
  // A chat prompt's special tokens are parsed when the request says so.
  r.sampling.temperature = 0;
  r.prompt = "</s>";
  const std::vector<int32_t> plain = PreparePrompt(r, tok, 64).value();
  r.encode.parse_special = true;
  r.encode.add_bos = false;
  const std::vector<int32_t> special = PreparePrompt(r, tok, 64).value();
  CHECK(special == std::vector<int32_t>{tok.eos_id()});
  CHECK(plain != special);
}

}  // namespace
}  // namespace odmoe
