// Tool calls in the shapes of OpenAI's chat completions API: the reply's
// `message.tool_calls`, and the `delta.tool_calls` of a streamed reply, made
// from the parser's calls and events (tool_call_parser.h). A reply with calls
// ends with finish_reason "tool_calls" (kFinishReasonToolCalls).
//
//   message["tool_calls"] = ToolCallsJson(reply.tool_calls);
//   //   [{"id": "call_...", "type": "function",
//   //     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]
//   for (const ToolCallEvent& e : events) {
//     if (auto d = ToolCallDeltaJson(e)) delta["tool_calls"] = *d;
//   }
//   //   begin:     [{"index": 0, "id": "call_...", "type": "function",
//   //                "function": {"name": "get_weather", "arguments": ""}}]
//   //   fragment:  [{"index": 0, "function": {"arguments": "{\"city\": "}}]
//
// Text in these values may hold any bytes: write them with DumpJson
// (json_reply.h), which never throws.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "main_node/tool_call_parser.h"
#include "nlohmann/json.hpp"

namespace odmoe {

inline constexpr std::string_view kFinishReasonToolCalls = "tool_calls";

/// One call as message.tool_calls holds it.
nlohmann::json ToolCallJson(const ToolCall& call);
/// message.tool_calls: an array of ToolCallJson.
nlohmann::json ToolCallsJson(const std::vector<ToolCall>& calls);

/// delta.tool_calls announcing call `index`: id, type, name, arguments "".
nlohmann::json ToolCallBeginDelta(int index, const std::string& id, const std::string& name);
/// delta.tool_calls carrying a fragment of call `index`'s arguments.
nlohmann::json ToolCallArgumentsDelta(int index, const std::string& fragment);

/// The delta.tool_calls of a kCallBegin or kCallArguments event; nullopt for
/// the others (content goes in delta.content, kCallAbort's text too, and
/// kCallEnd sends nothing).
std::optional<nlohmann::json> ToolCallDeltaJson(const ToolCallEvent& event);

/// The finish_reason of a reply that ended for `otherwise` ("stop",
/// "length"): "tool_calls" when it stopped on its own holding calls.
std::string ToolCallFinishReason(const ParsedReply& reply, std::string_view otherwise);

}  // namespace odmoe
