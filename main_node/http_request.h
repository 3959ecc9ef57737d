// OpenAI-style request bodies, parsed and checked field by field before
// anything runs: every parameter is one the server honours, one whose value
// asks for nothing (no tools, best_of 1, ...), or a 400 naming it.
// Parameters accepted because they change nothing here (metadata, store,
// service_tier auto/default, modalities ["text"], cache_prompt) are still
// checked for their reference shape.
// Pure functions of the JSON (and, for token-id prompts, the tokenizer), so
// the HTTP handlers stay thin and the parsing is fuzzed on its own
// (tests/fuzz/fuzz_http_request.cpp).
//
//   absl::StatusOr<nlohmann::json> body = ParseRequestJson(request_body);  // strict
//   ParsedRequest parsed;
//   absl::Status st = ParseCompletionBody(*body, "tiny-mixtral", tokenizer, &parsed);
//   // INVALID_ARGUMENT "temperature: must be at most 2" (request_fields.h), NOT_FOUND for
//   // another model
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/generation.h"
#include "engine/request_fields.h"
#include "main_node/chat_template.h"
#include "main_node/tool_request.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace odmoe {

/// The most choices one request may ask for (`n`).
inline constexpr int kMaxChoices = 16;

/// The sampling part shared by both endpoints, checked field by field.
struct ParsedRequest {
  GenerateRequest gen;
  std::vector<std::string> stop;
  bool stream = false;
  /// `n`: choices generated for the prompt, choice i with seed + i (each a
  /// generation of its own, batched with the others up to main.max_running).
  int n = 1;
  bool include_usage = false;     // stream_options.include_usage
  bool max_tokens_given = false;  // max_tokens, max_completion_tokens or n_predict
  /// No limit asked for (chat without max_tokens) or n_predict -1: the
  /// reply may fill the context (the caller sets max_tokens once the prompt
  /// is tokenized).
  bool fill_context = false;
  bool echo = false;              // completions: the prompt (and its logprobs) first
  bool no_generation = false;     // completions: max_tokens 0 with echo
  std::string prompt_param;       // "prompt" or "messages": named by context errors
  /// Chat: the tools the model may call and how (tool_request.h); none for a
  /// completion.
  ToolRequest tools;
};

/// The JSON values a request body may hold by default (ParseRequestJson).
inline constexpr size_t kMaxRequestJsonValues = 1u << 20;

/// A request body as one JSON object, strictly: INVALID_ARGUMENT "body: ..."
/// for text that is not JSON, a NUL byte anywhere (nlohmann's parser would
/// take it for the end of the input and ignore what follows), anything but
/// whitespace after the value, a value that is not an object, or an object
/// (at any depth) that names one key twice ("body: duplicate key 'model'").
/// Quoted keys are capped (ClipForMessage). More than `max_values` JSON
/// values (scalars, arrays and objects, at any depth) stop the parse at once:
/// a parsed value costs 16 to 50 bytes against the 2 of "1," in a body, so an
/// 8 MB array of token ids would otherwise hold some 200 MB while parsed.
absl::StatusOr<nlohmann::json> ParseRequestJson(std::string_view text,
                                                size_t max_values = kMaxRequestJsonValues);

/// INVALID_ARGUMENT "<param>: <what>" (the HTTP layer names `param` in the
/// error body).
absl::Status Bad(const std::string& param, const std::string& what);

/// Rejects parameters the server does not honour (null means "not given").
absl::Status CheckParameters(const nlohmann::json& body, bool chat);

/// The parameters both endpoints share (the request fields offered to HTTP,
/// request_fields.h, read from the table); out->prompt_param says which one.
/// NOT_FOUND when `model` names another model than `model_id`.
absl::Status ParseCommon(const nlohmann::json& body, const std::string& model_id,
                         ParsedRequest* out);

/// What the chat template reads besides the messages: reasoning_effort,
/// chat_template_kwargs (any keys, passed to the template as sent;
/// enable_thinking must be a bool, reasoning_effort a string; the keys the
/// request sets itself, such as messages or bos_token, are refused), tools
/// and documents (arrays, passed as sent), add_generation_prompt (a bool,
/// llama-server's). Objects keep their order in the ordered overload only.
absl::Status ParseChatOptions(const nlohmann::json& body, ChatOptions* out);

/// The messages of a chat body (role, content as a string, null or text
/// parts, reasoning_content, tool_calls, tool_call_id, name:
/// "messages[2].tool_calls[0].function: ...") and ParseChatOptions' fields,
/// from the body parsed with its key order kept (tools reach the template's
/// tojson as the client wrote them). /apply-template's parser.
absl::Status ParseChatMessages(const nlohmann::ordered_json& body,
                               std::vector<ChatMessage>* messages, ChatOptions* options);

/// A /v1/completions body: the common parameters, the prompt (a string, a
/// one-string array, or 32-bit token ids, decoded to text), logprobs and
/// echo. The prompt's own checks (empty, ids in the vocabulary, the context)
/// are PreparePrompt's, when the node validates the request.
absl::Status ParseCompletionBody(const nlohmann::json& body, const std::string& model_id,
                                 const Tokenizer& tokenizer, ParsedRequest* out);

/// A /v1/chat/completions body: the common parameters, the messages,
/// logprobs / top_logprobs and the template options (rendering and
/// tokenizing the conversation stay with the caller). `ordered`: the same
/// body parsed as ordered_json (null: re-made from `body`, keys then sorted).
absl::Status ParseChatBody(const nlohmann::json& body, const std::string& model_id,
                           ParsedRequest* out, std::vector<ChatMessage>* messages,
                           ChatOptions* options, const nlohmann::ordered_json* ordered = nullptr);

}  // namespace odmoe
