// Strict request bodies (main_node/http_request.h, issue 32 finding 8):
// duplicate keys, a NUL or other bytes after the value, integers out of
// range with the bound they break, and error messages that quote client
// input capped (ClipForMessage).
#include <catch2/catch.hpp>
#include <string>

#include "gguf/gguf_reader.h"
#include "main_node/http_reply.h"
#include "main_node/http_request.h"
#include "test_paths.h"

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
