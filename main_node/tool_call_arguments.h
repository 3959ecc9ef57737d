// The JSON value of one argument written as text between tags (Qwen3-Coder's
// <parameter=P>, GLM-4.5's <arg_value>), typed by the tool's JSON Schema so
// that the call's arguments are the JSON object the tool expects:
//
//   schema {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
//   TaggedArgumentJson(schema, "city", "Paris")   -> "\"Paris\""
//   TaggedArgumentJson(schema, "days", "3")       -> "3"
//   TaggedArgumentJson(schema, "days", "three")   -> "\"three\""   (not an integer: kept as text)
//   TaggedArgumentJson(schema, "extra", "{}")     -> "\"{}\""      (no schema: text)
//
// Rules: a property whose type includes "string" (and nothing that the text
// parses as) is the raw text; other types parse the text as JSON (booleans
// also as True/False) and keep it when the parsed kind is one the schema
// allows; a property without a "type" keeps any JSON the text parses as;
// everything else, and a property the schema does not name, is the raw text
// as a JSON string. Never throws; invalid UTF-8 becomes U+FFFD.
#pragma once

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace odmoe {

/// True when every value of `key` is its raw text as a JSON string (a
/// "string"-only property, or one the schema does not name): such a value
/// can stream before its end.
bool TaggedArgumentIsText(const nlohmann::ordered_json& parameters_schema, std::string_view key);

/// `value` as JSON text typed by parameters_schema.properties[key].
std::string TaggedArgumentJson(const nlohmann::ordered_json& parameters_schema, std::string_view key,
                               std::string_view value);

}  // namespace odmoe
