#include "main_node/tool_request.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/clip_for_message.h"

namespace odmoe {
namespace {

using json = nlohmann::ordered_json;

absl::Status Invalid(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(std::string(field) + ": " + std::string(what));
}

bool IsToolNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool IsToolName(std::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (char c : name) {
    if (!IsToolNameChar(c)) return false;
  }
  return true;
}

absl::StatusOr<ToolDefinition> ParseTool(const json& entry, const std::string& field) {
  if (!entry.is_object())
    return Invalid(field, "expected an object {type: \"function\", function: {...}}");
  auto type = entry.find("type");
  if (type == entry.end() || !type->is_string() || *type != "function") {
    return Invalid(field + ".type", "expected \"function\"");
  }
  auto function = entry.find("function");
  if (function == entry.end() || !function->is_object()) {
    return Invalid(field + ".function", "expected an object {name, description?, parameters?}");
  }
  ToolDefinition tool;
  auto name = function->find("name");
  if (name == function->end() || !name->is_string() ||
      !IsToolName(name->get_ref<const std::string&>())) {
    return Invalid(field + ".function.name",
                   "expected 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'");
  }
  tool.name = name->get<std::string>();
  if (auto d = function->find("description"); d != function->end() && !d->is_null()) {
    if (!d->is_string()) return Invalid(field + ".function.description", "expected a string");
    tool.description = d->get<std::string>();
  }
  tool.parameters = json{{"type", "object"}, {"properties", json::object()}};
  if (auto p = function->find("parameters"); p != function->end() && !p->is_null()) {
    if (!p->is_object())
      return Invalid(field + ".function.parameters", "expected a JSON Schema object");
    tool.parameters = *p;
  }
  if (auto s = function->find("strict"); s != function->end() && !s->is_null()) {
    if (!s->is_boolean()) return Invalid(field + ".function.strict", "expected a boolean");
    tool.strict = s->get<bool>();
  }
  return tool;
}

absl::StatusOr<ToolChoice> ParseChoice(const json& value, const ToolRequest& request) {
  ToolChoice choice;
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "auto") {
      choice.kind = ToolChoiceKind::kAuto;
    } else if (s == "none") {
      choice.kind = ToolChoiceKind::kNone;
    } else if (s == "required") {
      choice.kind = ToolChoiceKind::kRequired;
    } else {
      return Invalid("tool_choice", absl::StrCat("expected \"auto\", \"none\", \"required\" or ",
                                                 "{type: \"function\", function: {name}}, got '",
                                                 ClipForMessage(s), "'"));
    }
  } else if (value.is_object()) {
    auto type = value.find("type");
    if (type == value.end() || !type->is_string() || *type != "function") {
      return Invalid("tool_choice.type", "expected \"function\"");
    }
    auto function = value.find("function");
    auto name =
        function != value.end() && function->is_object() ? function->find("name") : value.end();
    if (function == value.end() || !function->is_object() || name == function->end() ||
        !name->is_string()) {
      return Invalid("tool_choice.function", "expected an object {name}");
    }
    choice.kind = ToolChoiceKind::kNamed;
    choice.name = name->get<std::string>();
    if (request.Find(choice.name) == nullptr) {
      return Invalid("tool_choice",
                     absl::StrCat("no tool named '", ClipForMessage(choice.name), "'"));
    }
  } else {
    return Invalid(
        "tool_choice",
        "expected \"auto\", \"none\", \"required\" or {type: \"function\", function: {name}}");
  }
  if (choice.kind == ToolChoiceKind::kRequired && request.tools.empty()) {
    return Invalid("tool_choice", "\"required\" needs at least one tool in 'tools'");
  }
  return choice;
}

}  // namespace

const ToolDefinition* ToolRequest::Find(std::string_view name) const {
  for (const ToolDefinition& t : tools) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<ToolRequest> ParseToolRequest(const json& body) {
  ToolRequest request;
  if (!body.is_object()) return request;
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array())
      return Invalid("tools", "expected an array of {type: \"function\", function: {...}}");
    if (tools->size() > kMaxTools) {
      return Invalid("tools", absl::StrCat("at most ", kMaxTools, " tools, got ", tools->size()));
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string field = absl::StrCat("tools[", i, "]");
      auto tool = ParseTool((*tools)[i], field);
      if (!tool.ok()) return tool.status();
      if (request.Find(tool->name) != nullptr) {
        return Invalid(field + ".function.name",
                       absl::StrCat("'", tool->name, "' names two tools"));
      }
      request.tools.push_back(*std::move(tool));
    }
  }
  request.choice.kind = request.tools.empty() ? ToolChoiceKind::kNone : ToolChoiceKind::kAuto;
  if (auto choice = body.find("tool_choice"); choice != body.end() && !choice->is_null()) {
    auto parsed = ParseChoice(*choice, request);
    if (!parsed.ok()) return parsed.status();
    request.choice = *std::move(parsed);
  }
  if (auto parallel = body.find("parallel_tool_calls");
      parallel != body.end() && !parallel->is_null()) {
    if (!parallel->is_boolean()) return Invalid("parallel_tool_calls", "expected a boolean");
    request.parallel = parallel->get<bool>();
  }
  return request;
}

const char* ToolChoiceKindName(ToolChoiceKind kind) {
  switch (kind) {
    case ToolChoiceKind::kAuto:
      return "auto";
    case ToolChoiceKind::kNone:
      return "none";
    case ToolChoiceKind::kRequired:
      return "required";
    case ToolChoiceKind::kNamed:
      return "function";
  }
  return "auto";
}

}  // namespace odmoe
