// Strict request bodies (main_node/http_request.h, issue 32 finding 8):
// duplicate keys, a NUL or other bytes after the value, integers out of
// range with the bound they break, and error messages that quote client
// input capped (ClipForMessage).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "main_node/http_reply.h"
#include "main_node/http_request.h"
#include "test_paths.h"
#include "util/status_macros.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

const Tokenizer& TinyTokenizer() {
  static const std::unique_ptr<GgufFile> file =
      std::move(*GgufFile::Open(SourcePath("models/tiny-mixtral-f16.gguf")));
  static const std::unique_ptr<Tokenizer> tok = std::move(*Tokenizer::FromGguf(*file));
  return *tok;
}

absl::Status Completion(const std::string& body) {
  absl::StatusOr<json> j = ParseRequestJson(body);
  if (!j.ok()) return j.status();
  ParsedRequest parsed;
  return ParseCompletionBody(*j, "tiny-mixtral", TinyTokenizer(), &parsed);
}

absl::Status Chat(const std::string& body) {
  absl::StatusOr<json> j = ParseRequestJson(body);
  if (!j.ok()) return j.status();
  ParsedRequest parsed;
  std::vector<ChatMessage> messages;
  ChatOptions options;
  return ParseChatBody(*j, "tiny-mixtral", &parsed, &messages, &options);
}

TEST_CASE("http request: a strict body parses as before", "[http][request]") {
  CHECK(Completion(R"({"prompt": "Hi", "max_tokens": 4, "stop": ["a", "b"]})").ok());
  CHECK(Chat(R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})").ok());
  // Whitespace after the value is JSON.
  CHECK(Completion("{\"prompt\": \"Hi\"} \r\n\t ").ok());
  // The same key in two different objects is no duplicate.
  CHECK(Chat(R"({"messages": [{"role": "user", "content": "a"},
                              {"role": "assistant", "content": "b"}]})")
            .ok());
}

TEST_CASE("http request: a duplicate key is a 400 naming it", "[http][request]") {
  absl::Status s = Completion(R"({"prompt": "Hi", "max_tokens": 4, "max_tokens": 5})");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s) == "body: duplicate key 'max_tokens' (each key at most once per object)");
  s = Chat(R"({"messages": [{"role": "user", "role": "system", "content": "x"}]})");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s).find("duplicate key 'role'") != std::string::npos);
  // Nested deeper, and a key long enough to be capped.
  const std::string long_key(1000, 'k');
  s = Completion(R"({"prompt": "Hi", "x": {"y": {")" + long_key + R"(": 1, ")" + long_key +
                 R"(": 2}}})");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s).find("(1000 bytes)") != std::string::npos);
  CHECK(Message(s).size() < 300);
}

TEST_CASE("http request: a NUL or other bytes after the value are a 400", "[http][request]") {
  absl::Status s = Completion(std::string("{\"prompt\": \"Hi\"}\0", 17));
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s).find("NUL byte at offset 16") != std::string::npos);
  s = Completion(std::string("{\"prompt\": \"Hi\"}\0{\"max_tokens\": 100000000}", 42));
  CHECK(absl::IsInvalidArgument(s));
  s = Completion(R"({"prompt": "Hi"} {"prompt": "again"})");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s).find("body: not valid JSON (at byte") == 0);
  s = Completion(R"({"prompt": "Hi"}x)");
  CHECK(absl::IsInvalidArgument(s));
  s = Completion(R"({"prompt": "Hi", "max_tokens": 327e444444442})");  // found by fuzz_http_request
  CHECK(Message(s) == "body: a number is out of range (larger than a double holds)");
  s = Completion(R"(["prompt"])");
  CHECK(Message(s) == "body: expected a JSON object");
  // The parser's own message quotes the token it read: never echoed.
  s = Completion("{\"prompt\": \"" + std::string(100000, 'p') + "\" ]");
  CHECK(absl::IsInvalidArgument(s));
  CHECK(Message(s).size() < 100);
}

TEST_CASE("http request: max_tokens out of range says the real bound", "[http][request]") {
  const std::string most = "max_tokens: must be at most " + std::to_string(kMaxMaxTokens);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 1000000000000000000})")) == most);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 18446744073709551615})")) == most);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 16777217})")) == most);
  CHECK(Completion(R"({"prompt": "Hi", "max_tokens": 16777216})").ok());
  const std::string range =
      "max_tokens: expected an integer from 1 to " + std::to_string(kMaxMaxTokens);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 1e18})")) == range);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 2.5})")) == range);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": "8"})")) == range);
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": -3})")) ==
        "max_tokens: must be at least 1");
  CHECK(Message(Completion(R"({"prompt": "Hi", "max_tokens": 0})")) ==
        "max_tokens: must be at least 1 (0 only with echo)");
  CHECK(Completion(R"({"prompt": "Hi", "max_tokens": 0, "echo": true})").ok());
  CHECK(Message(Chat(R"({"messages": [], "max_completion_tokens": 1e9})")) ==
        "max_completion_tokens: expected an integer from 1 to " + std::to_string(kMaxMaxTokens));
  CHECK(Message(Completion(R"({"prompt": "Hi", "logprobs": 21})")) ==
        "logprobs: must be at most 20");
  CHECK(Message(Completion(R"({"prompt": "Hi", "logprobs": 1e300})")) ==
        "logprobs: expected an integer from 0 to 20");
  CHECK(Message(Chat(R"({"messages": [], "logprobs": true, "top_logprobs": 99})")) ==
        "top_logprobs: must be at most 20");
}

TEST_CASE("http request: error messages quote client input capped", "[http][request]") {
  const std::string huge(100000, 'm');
  absl::Status s = Completion(R"({"prompt": "Hi", "model": ")" + huge + R"("})");
  CHECK(absl::IsNotFound(s));
  CHECK(Message(s).find("(100000 bytes)") != std::string::npos);
  CHECK(Message(s).size() < 400);
  s = Completion(R"({"prompt": "Hi", ")" + huge + R"(": 1})");
  CHECK(Message(s).size() < 400);
  s = Completion(R"({"prompt": "Hi", "stream": true, "stream_options": {")" + huge + R"(": 1}})");
  CHECK(Message(s).size() < 400);
  s = Chat(R"({"messages": [], "chat_template_kwargs": {")" + huge + R"(": 1}})");
  CHECK(Message(s).size() < 400);
}

}  // namespace
}  // namespace odmoe::test

namespace odmoe::test {

TEST_CASE("http request: more JSON values than the bound stop the parse", "[http][request]") {
  std::string ids = R"({"prompt": [1)";
  for (int i = 1; i < 100; ++i) ids += ",1";
  ids += "]}";
  // 1 object + 1 array + 100 ids = 102 values.
  CHECK(ParseRequestJson(ids, 102).ok());
  const absl::StatusOr<nlohmann::json> over = ParseRequestJson(ids, 101);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().message() ==
        "body: more than 101 JSON values (a prompt of token ids is at most the context's "
        "length)");
  // Nested arrays count too.
  CHECK_FALSE(ParseRequestJson(R"({"a": [[[[[[]]]]]]})", 6).ok());
  CHECK(ParseRequestJson(R"({"a": [[[[[[]]]]]]})", 8).ok());
}

}  // namespace odmoe::test

namespace odmoe::test {
namespace {

absl::StatusOr<ParsedRequest> ParsedCompletion(const nlohmann::json& body) {
  ParsedRequest parsed;
  ODMOE_RETURN_IF_ERROR(ParseCompletionBody(body, "tiny-mixtral", TinyTokenizer(), &parsed));
  return parsed;
}

absl::StatusOr<ParsedRequest> ParsedChat(nlohmann::json body) {
  body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", "Hi"}}});
  ParsedRequest parsed;
  std::vector<ChatMessage> messages;
  ChatOptions options;
  ODMOE_RETURN_IF_ERROR(ParseChatBody(body, "tiny-mixtral", &parsed, &messages, &options));
  return parsed;
}

}  // namespace

// These were refused with "not supported" before issue 34 (a zero penalty and
// an empty logit_bias only were accepted); now they are read and checked.
TEST_CASE("http request: the sampling chain's parameters are read and checked", "[http][request]") {
  using json = nlohmann::json;
  const ParsedRequest p = ParsedCompletion(json{{"prompt", "Hi"},
                                                {"top_k", 40},
                                                {"min_p", 0.05},
                                                {"typical_p", 0.9},
                                                {"presence_penalty", 0.5},
                                                {"frequency_penalty", -0.5},
                                                {"repetition_penalty", 1.2},
                                                {"repeat_last_n", -1},
                                                {"logit_bias", {{"15", -100}, {"7", 2.5}}},
                                                {"min_tokens", 3},
                                                {"ignore_eos", true},
                                                {"stop_token_ids", {2, 13}}})
                              .value();
  const SamplingParams& s = p.gen.sampling;
  CHECK(s.top_k == 40);
  CHECK(s.min_p == 0.05f);
  CHECK(s.typical_p == 0.9f);
  CHECK(s.presence_penalty == 0.5f);
  CHECK(s.frequency_penalty == -0.5f);
  CHECK(s.repetition_penalty == 1.2f);
  CHECK(s.repeat_last_n == -1);
  CHECK(s.logit_bias == std::map<int32_t, float>{{7, 2.5f}, {15, -100.0f}});
  CHECK(p.gen.min_tokens == 3);
  CHECK(p.gen.ignore_eos);
  CHECK(p.gen.stop_token_ids == std::vector<int32_t>{2, 13});
  // The same on chat.
  CHECK(ParsedChat(json{{"presence_penalty", 1}, {"logit_bias", {{"3", 1}}}})
            .value()
            .gen.sampling.presence_penalty == 1.0f);

  auto message = [](const json& extra) {
    json body = {{"prompt", "Hi"}};
    body.update(extra);
    return std::string(ParsedCompletion(body).status().message());
  };
  CHECK(message({{"presence_penalty", 2.5}}) == "presence_penalty: must be at most 2");
  CHECK(message({{"frequency_penalty", "high"}}) ==
        "frequency_penalty: expected a number from -2 to 2");
  CHECK(message({{"repetition_penalty", 0}}) == "repetition_penalty: must be greater than 0");
  CHECK(message({{"top_k", -2}}) == "top_k: must be at least -1");
  CHECK(message({{"min_p", 2}}) == "min_p: must be at most 1");
  CHECK(message({{"typical_p", 0}}) == "typical_p: must be greater than 0");
  CHECK(message({{"min_tokens", 1.5}}) == "min_tokens: expected an integer from 0 to 16777216");
  CHECK(message({{"ignore_eos", 1}}) == "ignore_eos: expected true or false");
  CHECK(message({{"logit_bias", {{"15", 101}}}}) ==
        "logit_bias: the bias of token 15 must be from -100 to 100");
  CHECK(message({{"logit_bias", {{"hello", 1}}}}) == "logit_bias: key 'hello' is not a token id");
  CHECK(message({{"logit_bias", {{"-1", 1}}}}) == "logit_bias: -1 is not a token id");
  CHECK(message({{"logit_bias", {1, 2}}}) == "logit_bias: expected an object of token id -> bias");
  CHECK(message({{"stop_token_ids", 2}}) == "stop_token_ids: expected an array of token ids");
  CHECK(message({{"stop_token_ids", {"2"}}}) == "stop_token_ids: expected an array of token ids");
  CHECK(message({{"stop_token_ids", {-4}}}) == "stop_token_ids: -4 is not a token id");
  // n: 1 to 16 choices (tests/cluster/http_choices_test.cpp runs them).
  CHECK(message({{"n", 2}}).empty());
  CHECK(message({{"n", 16}}).empty());
  CHECK(message({{"n", 17}}) == "n: expected an integer from 1 to 16");
  CHECK(message({{"n", 0}}) == "n: expected an integer from 1 to 16");
  CHECK(message({{"n", 1.5}}) == "n: expected an integer from 1 to 16");
}

TEST_CASE("http request: parameters accepted as the reference APIs accept them",
          "[http][request]") {
  using json = nlohmann::json;
  auto message = [](const json& extra) {
    json body = {{"prompt", "Hi"}};
    body.update(extra);
    return std::string(ParsedCompletion(body).status().message());
  };
  CHECK(message({{"metadata", {{"user", "x"}, {"team", "y"}}},
                 {"store", false},
                 {"service_tier", "auto"},
                 {"modalities", {"text"}},
                 {"cache_prompt", true}}) == "");
  CHECK(message({{"service_tier", "default"}}) == "");
  CHECK(ParsedChat(json{{"modalities", {"text"}}, {"store", true}}).ok());
  CHECK(message({{"metadata", {{"n", 1}}}}) == "metadata: expected an object of strings");
  CHECK(message({{"metadata", "x"}}) == "metadata: expected an object of strings");
  CHECK(message({{"store", "yes"}}) == "store: expected true or false");
  CHECK(message({{"cache_prompt", 1}}) == "cache_prompt: expected true or false");
  CHECK(message({{"service_tier", "priority"}}) ==
        "service_tier: only \"auto\" or \"default\" (this server has one tier)");
  CHECK(message({{"modalities", {"text", "audio"}}}) ==
        "modalities: only [\"text\"] (this server outputs text)");
  CHECK(message({{"modalities", "text"}}) ==
        "modalities: only [\"text\"] (this server outputs text)");
}

TEST_CASE("http request: llama-server's n_predict is max_tokens", "[http][request]") {
  using json = nlohmann::json;
  ParsedRequest p = ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", 9}}).value();
  CHECK(p.gen.max_tokens == 9);
  CHECK(p.max_tokens_given);
  CHECK_FALSE(p.fill_context);
  // -1: until the end of the context (or EOS).
  p = ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", -1}}).value();
  CHECK(p.fill_context);
  // The OpenAI names win.
  p = ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", -1}, {"max_tokens", 5}}).value();
  CHECK(p.gen.max_tokens == 5);
  CHECK_FALSE(p.fill_context);
  p = ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", 30}, {"max_tokens", 5}}).value();
  CHECK(p.gen.max_tokens == 5);
  CHECK(ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", -3}}).status().message() ==
        "n_predict: expected -1 (until the end of the context) or an integer from 1 to 16777216");
  CHECK(ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", 0}}).status().message() ==
        "n_predict: must be at least 1 (0 only with echo)");
  CHECK(ParsedCompletion(json{{"prompt", "Hi"}, {"n_predict", 1.5}}).status().message() ==
        "n_predict: expected an integer from 1 to 16777216");
  // Chat without a limit fills the context; completions default to 16.
  CHECK(ParsedChat(json::object()).value().fill_context);
  CHECK_FALSE(ParsedCompletion(json{{"prompt", "Hi"}}).value().fill_context);
}

}  // namespace odmoe::test
