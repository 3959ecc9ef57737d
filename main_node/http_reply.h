// The bodies the HTTP API writes (http_api.cpp), built apart from the server
// so that they can be tested and fuzzed alone (tests/fuzz/targets/
// fuzz_http_reply.cpp): OpenAI-style error bodies, logprobs of completions
// and chats, and the chunks of a streamed reply.
//
// Every builder takes text that may hold any bytes (a token's piece can be a
// lone byte of a UTF-8 character; paths and names come from the client) and
// every body it makes is valid UTF-8 and parses as JSON: text fields carry
// invalid bytes as U+FFFD (ValidUtf8Text, one per byte, as the tokenizer's
// decoder does), and OpenAI's "bytes" arrays (chat logprobs) carry a token's
// raw bytes exactly. Text made into bytes only through DumpJson
// (json_reply.h), which never throws.
//
//   auto piece = [&tok](int32_t id) { return tok.TokenToPiece(id); };
//   size_t offset = 0;
//   nlohmann::json lp = CompletionLogprobs(piece, ids, scores, /*top_n=*/5, &offset);
//   nlohmann::json c = ChatLogprob(piece, id, row);   // {"token","logprob","bytes","top_logprobs"}
//   std::string event = SseEvent(StreamChunk(head, /*chat=*/true, "Hi", nullptr, false, nullptr));
//   std::string err = OpenAiErrorBody("temperature: must be at most 2",
//                                     "invalid_request_error", "temperature");
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/scoring.h"
#include "nlohmann/json.hpp"
#include "util/clip_for_message.h"  // ClipForMessage: what error messages quote

namespace odmoe {

/// A token's text as its bytes (Tokenizer::TokenToPiece): any bytes at all.
using TokenPieceFn = std::function<std::string(int32_t id)>;

/// `bytes` with every byte that is not part of a valid UTF-8 character
/// replaced by U+FFFD (tokenizer/utf8.h AppendSanitizedUtf8).
std::string ValidUtf8Text(std::string_view bytes);

/// An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}
/// (empty param / code are null).
std::string OpenAiErrorBody(const std::string& message, const std::string& type,
                            const std::string& param = "", const std::string& code = "");

/// The body of an error the server makes itself (HttpServer::ErrorBody):
/// type invalid_request_error for 4xx, server_error for 5xx. The message
/// names what the client sent (a path, a method): it is capped
/// (ClipForMessage) so that a reply never grows with the input.
std::string OpenAiServerErrorBody(int status, const std::string& message, const std::string& code);

/// The body of an error that happens while streaming (the status line is
/// already sent): OpenAI's shape, type server_error.
nlohmann::json StreamErrorBody(const absl::Status& status);

/// A completion's logprobs as the reference API shapes them: "tokens",
/// "token_logprobs" (null where `scores[i]` is unset: the prompt's first
/// token), "top_logprobs" (objects piece -> logprob, null without top_n) and
/// "text_offset". Alternatives are the distribution after the previous token
/// (RowScore::top); two alternatives whose text is the same after
/// replacement keep the first (the likelier). `text_offset` is where the
/// first token's text starts, advanced by each piece's byte length.
nlohmann::json CompletionLogprobs(const TokenPieceFn& piece, const std::vector<int32_t>& ids,
                                  const std::vector<std::optional<RowScore>>& scores, int top_n,
                                  size_t* text_offset);

/// One entry of a chat's logprobs.content: {"token", "logprob", "bytes",
/// "top_logprobs": [{"token", "logprob", "bytes"}...]}; "bytes" exact.
nlohmann::json ChatLogprob(const TokenPieceFn& piece, int32_t id, const RowScore& score);

/// What every chunk of one streamed reply repeats.
struct StreamChunkHead {
  std::string id;
  std::string object;  // "chat.completion.chunk" | "text_completion"
  int64_t created = 0;
  std::string model;
  bool include_usage = false;  // every chunk carries "usage": null
};

/// One chunk: a completion's {"text"} or a chat's "delta" ({"role":
/// "assistant"} for the first, empty text without a finish reason;
/// {"content"} or {"reasoning_content"} with text), `finish` (null or a
/// reason) and `logprobs` (null, or the logprobs of the tokens whose text
/// this chunk releases).
nlohmann::json StreamChunk(const StreamChunkHead& head, bool chat, const std::string& text,
                           const nlohmann::json& finish, bool reasoning,
                           const nlohmann::json& logprobs);
/// A chat chunk whose delta carries `tool_calls` (tool_call_json.h's
/// ToolCallBeginDelta / ToolCallArgumentsDelta), finish_reason null.
nlohmann::json ToolCallChunk(const StreamChunkHead& head, const nlohmann::json& tool_calls);

/// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json UsageChunk(const StreamChunkHead& head, const nlohmann::json& usage);

/// A server-sent event: "data: <json>\n\n".
std::string SseEvent(const nlohmann::json& value);

}  // namespace odmoe
