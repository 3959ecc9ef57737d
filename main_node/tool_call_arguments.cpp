#include "main_node/tool_call_arguments.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "main_node/json_reply.h"

namespace odmoe {
namespace {

using json = nlohmann::ordered_json;

std::vector<std::string> SchemaTypes(const json& property) {
  std::vector<std::string> types;
  auto type = property.find("type");
  if (type == property.end()) return types;
  if (type->is_string()) types.push_back(type->get<std::string>());
  if (type->is_array()) {
    for (const json& t : *type) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  return types;
}

bool KindAllowed(const json& v, const std::vector<std::string>& types) {
  for (const std::string& t : types) {
    if ((t == "integer" && v.is_number_integer()) || (t == "number" && v.is_number()) ||
        (t == "boolean" && v.is_boolean()) || (t == "object" && v.is_object()) ||
        (t == "array" && v.is_array()) || (t == "null" && v.is_null()) ||
        (t == "string" && v.is_string())) {
      return true;
    }
  }
  return false;
}

std::optional<json> ParseValue(std::string_view text) {
  if (text == "True") return json(true);
  if (text == "False") return json(false);
  json v = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

const json* Property(const json& parameters_schema, std::string_view key) {
  if (!parameters_schema.is_object()) return nullptr;
  auto props = parameters_schema.find("properties");
  if (props == parameters_schema.end() || !props->is_object()) return nullptr;
  auto p = props->find(std::string(key));
  return p != props->end() && p->is_object() ? &*p : nullptr;
}

}  // namespace

bool TaggedArgumentIsText(const json& parameters_schema, std::string_view key) {
  const json* property = Property(parameters_schema, key);
  if (property == nullptr) return true;
  const std::vector<std::string> types = SchemaTypes(*property);
  return !types.empty() && std::all_of(types.begin(), types.end(),
                                       [](const std::string& t) { return t == "string"; });
}

std::string TaggedArgumentJson(const json& parameters_schema, std::string_view key,
                               std::string_view value) {
  const json text = std::string(value);
  const json* property = Property(parameters_schema, key);
  if (property == nullptr) return DumpJson(text);
  const std::vector<std::string> types = SchemaTypes(*property);
  std::optional<json> parsed = ParseValue(Trim(value));
  if (types.empty()) {
    // No type: any JSON the text is, else the text (enums of strings stay text).
    return DumpJson(parsed && !parsed->is_string() ? *parsed : text);
  }
  if (parsed && !parsed->is_string() && KindAllowed(*parsed, types)) return DumpJson(*parsed);
  return DumpJson(text);
}

}  // namespace odmoe
