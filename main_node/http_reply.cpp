#include "main_node/http_reply.h"

#include <set>

#include "main_node/json_reply.h"
#include "tokenizer/utf8.h"

namespace odmoe {

using json = nlohmann::json;

namespace {

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Messages the server makes name the request's method and path: a whole
// message is capped a little above one echoed value.
constexpr size_t kMaxServerMessageBytes = 2 * kMaxEchoedBytes;


}  // namespace

std::string ValidUtf8Text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendSanitizedUtf8(bytes, /*final=*/true, &out);
  return out;
}

std::string OpenAiErrorBody(const std::string& message, const std::string& type,
                            const std::string& param, const std::string& code) {
  json e = {{"message", ValidUtf8Text(message)}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(ValidUtf8Text(param));
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return DumpJson(json{{"error", e}});
}

std::string OpenAiServerErrorBody(int status, const std::string& message, const std::string& code) {
  // Replaced first, then cut at a character: the cap bounds what is sent.
  return OpenAiErrorBody(ClipForMessage(ValidUtf8Text(message), kMaxServerMessageBytes),
                         status >= 500 ? "server_error" : "invalid_request_error", "", code);
}

json StreamErrorBody(const absl::Status& status) {
  return {{"error",
           {{"message", ValidUtf8Text(std::string(status.message()))},
            {"type", "server_error"},
            {"param", nullptr},
            {"code", nullptr}}}};
}

json CompletionLogprobs(const TokenPieceFn& piece, const std::vector<int32_t>& ids,
                        const std::vector<std::optional<RowScore>>& scores, int top_n,
                        size_t* text_offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string bytes = piece(ids[i]);
    tokens.push_back(ValidUtf8Text(bytes));
    offsets.push_back(*text_offset);
    *text_offset += bytes.size();
    if (i >= scores.size() || !scores[i].has_value()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(scores[i]->target_logprob);
    if (top_n == 0) {
      tops.push_back(nullptr);
      continue;
    }
    json alt = json::object();
    for (const TokenLogprob& t : scores[i]->top) {
      // Descending logprob: a key already there is the likelier token.
      alt.emplace(ValidUtf8Text(piece(t.id)), t.logprob);
    }
    tops.push_back(alt);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json ChatLogprob(const TokenPieceFn& piece, int32_t id, const RowScore& score) {
  const std::string bytes = piece(id);
  json top = json::array();
  for (const TokenLogprob& t : score.top) {
    const std::string p = piece(t.id);
    top.push_back({{"token", ValidUtf8Text(p)}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
  }
  return {{"token", ValidUtf8Text(bytes)},
          {"logprob", score.target_logprob},
          {"bytes", Bytes(bytes)},
          {"top_logprobs", top}};
}

json StreamChunk(const StreamChunkHead& head, bool chat, const std::string& text,
                 const json& finish, bool reasoning, const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", finish}};
  const std::string valid = ValidUtf8Text(text);
  if (chat) {
    choice["delta"] =
        valid.empty() && finish.is_null()
            ? json{{"role", "assistant"}}
            : (valid.empty() ? json::object()
                             : json{{reasoning ? "reasoning_content" : "content", valid}});
  } else {
    choice["text"] = valid;
  }
  choice["logprobs"] = logprobs;
  json out = {{"id", head.id},
              {"object", head.object},
              {"created", head.created},
              {"model", ValidUtf8Text(head.model)},
              {"choices", {choice}}};
  // With stream_options.include_usage every chunk carries "usage": null and
  // one last chunk (no choices) the usage.
  if (head.include_usage) out["usage"] = nullptr;
  return out;
}

json ToolCallChunk(const StreamChunkHead& head, const json& tool_calls) {
  json out = StreamChunk(head, /*chat=*/true, "", nullptr, false, nullptr);
  out["choices"][0]["delta"] = {{"tool_calls", tool_calls}};
  return out;
}

json UsageChunk(const StreamChunkHead& head, const json& usage) {
  return {{"id", head.id},
          {"object", head.object},
          {"created", head.created},
          {"model", ValidUtf8Text(head.model)},
          {"choices", json::array()},
          {"usage", usage}};
}

std::string SseEvent(const json& value) { return "data: " + DumpJson(value) + "\n\n"; }

}  // namespace odmoe
