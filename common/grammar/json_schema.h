// JSON Schema -> GBNF (grammar.h), for response_format json_schema and
// llama-server's `json_schema` field; JsonObjectGbnf() for json_object.
//
//   nlohmann::json schema = nlohmann::json::parse(R"({"type": "object",
//     "properties": {"name": {"type": "string", "maxLength": 40},
//                    "age": {"type": "integer", "minimum": 0, "maximum": 150}},
//     "required": ["name"]})");
//   ODMOE_ASSIGN_OR_RETURN(std::string gbnf, JsonSchemaToGbnf(schema));
//   ODMOE_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> g, ParseGbnf(gbnf));
//
// Every text the grammar accepts is JSON that validates against the schema;
// where a keyword narrows what is valid and the grammar cannot say it, the
// conversion fails (INVALID_ARGUMENT naming the keyword's JSON pointer:
// "json_schema /properties/tags/uniqueItems: 'uniqueItems' is not
// supported"), never a looser grammar. The grammar is in places stricter than
// the schema, as llama.cpp's and vLLM's are:
//   - object properties come in the schema's order (required ones always,
//     optional ones may be left out); extra properties (additionalProperties
//     true or a schema) come after them, with keys that use no escapes;
//   - strict (the default): an object schema with `properties` and no
//     `additionalProperties` allows no extra properties (OpenAI's strict mode);
//   - whitespace: at most 20 of [ \t\n] between tokens, none before the value
//     or after it;
//   - numbers: at most 20 integer digits, 24 fraction digits, 3 exponent
//     digits; an integer is written without fraction or exponent; "\u"
//     escapes of surrogates are not produced (characters are written whole);
//   - enum / const values are written as compact JSON (nlohmann's dump).
// Supported: type (and type lists), enum, const, properties, required,
// additionalProperties, items, prefixItems, minItems, maxItems, minLength,
// maxLength, pattern (a regular expression subset: literals, ., classes,
// \d \w \s, groups, |, * + ? {m,n}, ^ $), format (date, time, date-time, uuid,
// email, ipv4; other formats are annotations and are ignored, as validators
// do by default), minimum/maximum/exclusiveMinimum/exclusiveMaximum on
// integers, and on numbers when the bounds are integers, anyOf, oneOf (as anyOf: the
// branches must not overlap for the result to be exact), allOf (merged),
// $ref to #, #/$defs/..., #/definitions/... (recursive ones too), nullable
// through type lists. Not supported (an error): not, if/then/else,
// multipleOf, uniqueItems: true, contains, patternProperties,
// propertyNames, dependentRequired/dependentSchemas/dependencies,
// minProperties/maxProperties, unevaluatedProperties/unevaluatedItems, remote
// $ref, $dynamicRef. Annotations (title, description, default, examples,
// $comment, ...) and unknown keywords are ignored.
//
// Bounds: schema nesting at most kMaxSchemaDepth, the grammar at most
// kMaxGbnfBytes.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace odmoe {

inline constexpr int kMaxSchemaDepth = 64;

struct JsonSchemaOptions {
  /// Objects with `properties` and no `additionalProperties` take no extra
  /// properties (false: JSON Schema's default, any extra property).
  bool strict = true;
  /// The rule the schema's value is (a grammar's start rule is `root`), and
  /// a prefix for the names of the rules made for this schema. The shared
  /// rules (ws, json-*) keep their names and texts, and ParseGbnf takes a
  /// rule defined twice with the same text, so grammars of several schemas
  /// join by concatenation (a tool call's arguments):
  ///   std::string g = "root ::= \"<tool_call>\" (get-weather | search) \"</tool_call>\"\n";
  ///   g += *JsonSchemaToGbnf(weather_schema, {.root_rule = "get-weather", .rule_prefix = "w-"});
  ///   g += *JsonSchemaToGbnf(search_schema, {.root_rule = "search", .rule_prefix = "s-"});
  std::string root_rule = "root";
  std::string rule_prefix = "";
};

/// Takes ordered_json to keep the properties' order (a nlohmann::json
/// converts, with its keys sorted: parse the request with ordered_json or
/// pass the schema's text); the text overload parses in order.
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options = {});
absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_json,
                                             const JsonSchemaOptions& options = {});

/// Any JSON object (response_format {"type": "json_object"}).
std::string JsonObjectGbnf();

}  // namespace odmoe
