// Fuzz target: the HTTP API's reply builders (main_node/http_reply.h) with
// arbitrary bytes as token pieces, generated text, error messages and echoed
// names. Every body they make must parse as JSON and be valid UTF-8 (a body
// that is not used to end the process: issue 32), chat logprobs' "bytes"
// must be a token's bytes exactly and its "token" the same bytes with
// invalid ones as U+FFFD, and ClipForMessage must bound what it quotes.
//
// Input: fields separated by the two bytes 0x1F 0x1E: flags (byte 0: top_n,
// byte 1: chat / reasoning / include_usage / finish bits), text, error
// message, model name, then token pieces (token id i is piece i; the first
// 16).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "main_node/http_reply.h"
#include "main_node/json_reply.h"
#include "nlohmann/json.hpp"
#include "tokenizer/utf8.h"

namespace {

using json = nlohmann::json;

std::vector<std::string> Split(std::string_view in) {
  std::vector<std::string> fields;
  size_t from = 0;
  for (size_t at; (at = in.find("\x1f\x1e", from)) != std::string_view::npos; from = at + 2) {
    fields.emplace_back(in.substr(from, at - from));
  }
  fields.emplace_back(in.substr(from));
  return fields;
}

// A reply as bytes: must be valid UTF-8 and parse as JSON.
json Check(const std::string& bytes, const char* what) {
  if (std::optional<size_t> bad = odmoe::FindInvalidUtf8(bytes)) {
    odmoe::fuzz::Die(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(*bad));
  }
  json parsed = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) odmoe::fuzz::Die(std::string(what) + ": not JSON: " + bytes);
  return parsed;
}

void CheckChatLogprob(const json& entry, const std::string& piece) {
  std::string bytes;
  for (const json& b : entry.at("bytes")) bytes.push_back(static_cast<char>(b.get<int>()));
  if (bytes != piece) odmoe::fuzz::Die("chat logprob: bytes differ from the token's");
  if (entry.at("token").get<std::string>() != odmoe::ValidUtf8Text(piece)) {
    odmoe::fuzz::Die("chat logprob: token is not the piece with U+FFFD");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> f =
      Split(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string flags = f[0];
  const int top_n = flags.empty() ? 0 : static_cast<unsigned char>(flags[0]) % 21;
  const unsigned bits = flags.size() > 1 ? static_cast<unsigned char>(flags[1]) : 0;
  const std::string text = f.size() > 1 ? f[1] : "";
  const std::string message = f.size() > 2 ? f[2] : "";
  const std::string model = f.size() > 3 ? f[3] : "";
  std::vector<std::string> pieces(f.begin() + std::min<size_t>(f.size(), 4), f.end());
  if (pieces.size() > 16) pieces.resize(16);  // enough tokens; keeps each run cheap
  if (pieces.empty()) pieces.push_back(text);
  const odmoe::TokenPieceFn piece = [&pieces](int32_t id) {
    return pieces[static_cast<size_t>(id) % pieces.size()];
  };

  // Every token scored (the first not: a prompt's first token), each with up
  // to top_n alternatives among the others.
  std::vector<int32_t> ids;
  std::vector<std::optional<odmoe::RowScore>> scores;
  for (size_t i = 0; i < pieces.size(); ++i) {
    ids.push_back(static_cast<int32_t>(i));
    if (i == 0) {
      scores.emplace_back();
      continue;
    }
    odmoe::RowScore row;
    row.target = static_cast<int32_t>(i);
    row.target_logprob = -static_cast<double>(i);
    for (int k = 0; k < top_n && k < static_cast<int>(pieces.size()); ++k) {
      row.top.push_back({static_cast<int32_t>((i + k) % pieces.size()), -0.5 * k});
    }
    scores.push_back(row);
  }
  size_t offset = 0;
  const json completion = odmoe::CompletionLogprobs(piece, ids, scores, top_n, &offset);
  Check(odmoe::DumpJson(completion), "CompletionLogprobs");
  json content = json::array();
  for (size_t i = 1; i < ids.size(); ++i) {
    const json entry = odmoe::ChatLogprob(piece, ids[i], *scores[i]);
    const json back = Check(odmoe::DumpJson(entry), "ChatLogprob");
    CheckChatLogprob(back, pieces[i]);
    for (size_t k = 0; k < back.at("top_logprobs").size(); ++k) {
      CheckChatLogprob(back["top_logprobs"][k], piece(scores[i]->top[k].id));
    }
    content.push_back(entry);
  }

  const bool chat = bits & 1;
  const odmoe::StreamChunkHead head{"cmpl-1", chat ? "chat.completion.chunk" : "text_completion", 1,
                                    model, (bits & 4) != 0};
  const json finish = bits & 8 ? json("stop") : json(nullptr);
  const json lp = chat ? json{{"content", content}} : completion;
  Check(odmoe::SseEvent(odmoe::StreamChunk(head, chat, text, finish, bits & 2, lp)).substr(6),
        "StreamChunk");
  Check(odmoe::DumpJson(odmoe::UsageChunk(head, json{{"prompt_tokens", 1}})), "UsageChunk");
  Check(odmoe::DumpJson(odmoe::StreamErrorBody(absl::InternalError(message))), "StreamErrorBody");
  Check(odmoe::OpenAiErrorBody(message, "invalid_request_error", model, "code"), "OpenAiErrorBody");
  const json server =
      Check(odmoe::OpenAiServerErrorBody(404, message + model, ""), "OpenAiServerErrorBody");
  if (server.at("error").at("message").get<std::string>().size() > 4 * odmoe::kMaxEchoedBytes) {
    odmoe::fuzz::Die("OpenAiServerErrorBody: the message grows with the input");
  }
  // A free-form object whose keys and values are the pieces.
  json any = json::object();
  for (const std::string& p : pieces) any[p] = json::array({p, text});
  Check(odmoe::DumpJson(any), "DumpJson");
  const std::string capped = odmoe::ClipForMessage(text);
  if (capped.size() > odmoe::kMaxEchoedBytes + 32) odmoe::fuzz::Die("ClipForMessage: too long");
  if (text.size() <= odmoe::kMaxEchoedBytes && capped != text) {
    odmoe::fuzz::Die("ClipForMessage: changed a short text");
  }
  odmoe::fuzz::Consume(offset);
  return 0;
}
