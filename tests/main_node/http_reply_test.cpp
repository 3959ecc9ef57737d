// The HTTP API's reply builders (main_node/http_reply.h) with text that is not
// valid UTF-8: every body is valid UTF-8 JSON (a body that was not used to end
// the process, issue 32 finding 1), invalid bytes read U+FFFD, and chat
// logprobs keep a token's exact bytes.
#include "main_node/http_reply.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "main_node/json_reply.h"
#include "tokenizer/utf8.h"

namespace odmoe::test {
namespace {

using json = nlohmann::json;

const std::string kFffd(kUtf8Replacement);

// Every way a byte string fails to be UTF-8, and a valid one.
const std::vector<std::string> kBad = {
    "\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", std::string("a\0b", 3)};

json ParseValid(const std::string& bytes) {
  INFO(bytes);
  REQUIRE_FALSE(FindInvalidUtf8(bytes).has_value());
  json j = json::parse(bytes, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

TEST_CASE("http reply: DumpJson replaces invalid UTF-8 instead of throwing", "[http][reply]") {
  for (const std::string& bad : kBad) {
    const json j = {{"path", "/" + bad}, {bad, bad}};
    // What used to end the process (NUL is valid UTF-8: escaped).
    if (bad.find('\0') == std::string::npos) CHECK_THROWS(j.dump());
    ParseValid(DumpJson(j));
  }
  CHECK(DumpJson(json{{"t", "\xff"}}) == "{\"t\":\"" + kFffd + "\"}");
  CHECK(DumpJson(json{{"t", "na\xc3\xafve"}}) == "{\"t\":\"na\xc3\xafve\"}");
}

TEST_CASE("http reply: ValidUtf8Text is one U+FFFD per bad byte", "[http][reply]") {
  CHECK(ValidUtf8Text("ok") == "ok");
  CHECK(ValidUtf8Text("\xff") == kFffd);
  CHECK(ValidUtf8Text("\xc3") == kFffd);
  CHECK(ValidUtf8Text("\xc0\xaf") == kFffd + kFffd);
  CHECK(ValidUtf8Text("\xed\xa0\x80") == kFffd + kFffd + kFffd);
  CHECK(ValidUtf8Text("\xc3\xaf") == "\xc3\xaf");
}

TEST_CASE("http reply: error bodies are valid whatever they quote", "[http][reply]") {
  for (const std::string& bad : kBad) {
    json e = ParseValid(OpenAiErrorBody("No route GET /" + bad, "invalid_request_error", bad));
    CHECK(e["error"]["type"] == "invalid_request_error");
    e = ParseValid(OpenAiServerErrorBody(404, "No route GET /" + bad, "not_found"));
    CHECK(e["error"]["code"] == "not_found");
    ParseValid(SseEvent(StreamErrorBody(absl::InternalError(bad))).substr(6));
  }
  // A server-made message that names a huge path is capped.
  const json e =
      ParseValid(OpenAiServerErrorBody(404, "No route GET /" + std::string(20000, 'p'), ""));
  CHECK(e["error"]["message"].get<std::string>().size() < 400);
  CHECK(e["error"]["message"].get<std::string>().find("bytes)") != std::string::npos);
}

TEST_CASE("http reply: logprobs of byte-fallback tokens", "[http][reply]") {
  // "naïve" as byte-fallback pieces: ï is 0xC3 0xAF, one token each.
  const std::map<int32_t, std::string> pieces = {{1, "na"}, {2, "\xc3"}, {3, "\xaf"}, {4, "ve"}};
  const TokenPieceFn piece = [&pieces](int32_t id) { return pieces.at(id); };
  std::vector<int32_t> ids = {1, 2, 3, 4};
  std::vector<std::optional<RowScore>> scores(4);
  for (int i = 1; i < 4; ++i) {
    RowScore r;
    r.target = ids[i];
    r.target_logprob = -i;
    r.top = {{2, -0.1}, {3, -0.2}, {4, -0.3}};  // 2 and 3 both read U+FFFD
    scores[i] = r;
  }
  size_t offset = 0;
  const json c = ParseValid(DumpJson(CompletionLogprobs(piece, ids, scores, 3, &offset)));
  CHECK(c["tokens"] == json::array({"na", kFffd, kFffd, "ve"}));
  CHECK(c["text_offset"] == json::array({0, 2, 3, 4}));  // the raw bytes' offsets in "naïve"
  CHECK(offset == 6);
  CHECK(c["token_logprobs"][0].is_null());
  CHECK(c["top_logprobs"][1].size() == 2);  // U+FFFD once, with the likelier logprob
  CHECK(c["top_logprobs"][1][kFffd] == -0.1);

  const json chat = ParseValid(DumpJson(ChatLogprob(piece, 2, *scores[1])));
  CHECK(chat["token"] == kFffd);
  CHECK(chat["bytes"] == json::array({0xc3}));
  CHECK(chat["top_logprobs"][1]["bytes"] == json::array({0xaf}));
  CHECK(chat["top_logprobs"][2]["token"] == "ve");
}

TEST_CASE("http reply: streamed chunks carry valid text", "[http][reply]") {
  const StreamChunkHead head{"chatcmpl-1", "chat.completion.chunk", 7, "tiny\xff", true};
  json j = ParseValid(SseEvent(StreamChunk(head, true, "", nullptr, false, nullptr)).substr(6));
  CHECK(j["choices"][0]["delta"] == json{{"role", "assistant"}});
  CHECK(j["usage"].is_null());
  CHECK(j["model"] == "tiny" + kFffd);
  j = ParseValid(SseEvent(StreamChunk(head, true, "a\xc3", nullptr, true, nullptr)).substr(6));
  CHECK(j["choices"][0]["delta"]["reasoning_content"] == "a" + kFffd);
  j = ParseValid(
      SseEvent(StreamChunk(head, false, "\xed\xa0\x80", "stop", false, nullptr)).substr(6));
  CHECK(j["choices"][0]["text"] == kFffd + kFffd + kFffd);
  CHECK(j["choices"][0]["finish_reason"] == "stop");
  j = ParseValid(DumpJson(UsageChunk(head, json{{"total_tokens", 3}})));
  CHECK(j["choices"].empty());
}

}  // namespace
}  // namespace odmoe::test
