// The tool-calling fields of a chat request, read and checked in one place:
// `tools` (the functions the model may call), `tool_choice` (auto, none,
// required, or one named function) and `parallel_tool_calls`, as the OpenAI
// chat completions API defines them. Every error is INVALID_ARGUMENT naming
// the field:
//
//   "tools[1].function.name: expected 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'"
//   "tool_choice: no tool named 'get_wether'"
//   "parallel_tool_calls: expected a boolean"
//
// Absent and null fields take OpenAI's defaults: no tools, tool_choice "auto"
// when there are tools ("none" otherwise), parallel_tool_calls true.
//
//   ODMOE_ASSIGN_OR_RETURN(ToolRequest tools, ParseToolRequest(body));
//   if (tools.choice.kind != ToolChoiceKind::kNone) {
//     const ToolDefinition* t = tools.Find("get_weather");   // nullptr if absent
//   }
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace odmoe {

/// The most tools a request may declare (OpenAI's bound).
inline constexpr size_t kMaxTools = 128;
/// The longest tool name (OpenAI's bound; names are [a-zA-Z0-9_-]).
inline constexpr size_t kMaxToolNameBytes = 64;

/// One entry of `tools`: {type: "function", function: {name, description?,
/// parameters?, strict?}}.
struct ToolDefinition {
  std::string name;
  std::string description;    // empty when absent
  nlohmann::ordered_json parameters;  // a JSON Schema object; {"type":"object","properties":{}} when absent
  bool strict = false;
};

enum class ToolChoiceKind {
  kAuto,      // the model decides (no grammar)
  kNone,      // no tool calls: the reply is text
  kRequired,  // at least one call to any tool (constrained decoding)
  kNamed,     // a call to `ToolChoice::name` (constrained decoding)
};

struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::kNone;
  std::string name;  // kNamed only
};

struct ToolRequest {
  std::vector<ToolDefinition> tools;
  ToolChoice choice;
  bool parallel = true;  // parallel_tool_calls

  /// The tool named `name`, or nullptr.
  const ToolDefinition* Find(std::string_view name) const;
};

/// The tool fields of a chat request body (a JSON object). A body without
/// them gives an empty ToolRequest with choice kNone.
absl::StatusOr<ToolRequest> ParseToolRequest(const nlohmann::ordered_json& body);

/// "auto", "none", "required" or "function".
const char* ToolChoiceKindName(ToolChoiceKind kind);

}  // namespace odmoe
