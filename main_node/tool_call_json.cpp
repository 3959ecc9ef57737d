#include "main_node/tool_call_json.h"

namespace odmoe {

using nlohmann::json;

json ToolCallJson(const ToolCall& call) {
  return json{{"id", call.id},
              {"type", "function"},
              {"function", json{{"name", call.name}, {"arguments", call.arguments}}}};
}

json ToolCallsJson(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls) out.push_back(ToolCallJson(call));
  return out;
}

json ToolCallBeginDelta(int index, const std::string& id, const std::string& name) {
  return json::array({json{{"index", index},
                           {"id", id},
                           {"type", "function"},
                           {"function", json{{"name", name}, {"arguments", ""}}}}});
}

json ToolCallArgumentsDelta(int index, const std::string& fragment) {
  return json::array({json{{"index", index}, {"function", json{{"arguments", fragment}}}}});
}

std::optional<json> ToolCallDeltaJson(const ToolCallEvent& event) {
  switch (event.kind) {
    case ToolCallEvent::Kind::kCallBegin:
      return ToolCallBeginDelta(event.index, event.id, event.name);
    case ToolCallEvent::Kind::kCallArguments:
      return ToolCallArgumentsDelta(event.index, event.text);
    default:
      return std::nullopt;
  }
}

std::string ToolCallFinishReason(const ParsedReply& reply, std::string_view otherwise) {
  if (reply.tool_calls.empty() || otherwise != "stop") return std::string(otherwise);
  return std::string(kFinishReasonToolCalls);
}

}  // namespace odmoe
