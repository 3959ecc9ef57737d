// The grammar (GBNF, as llama.cpp writes it) that makes the model call a tool
// when a request says tool_choice "required" or names a function: the call's
// wrapper in the model's own syntax (tool_call_syntax.h: markers, the name as
// a literal, one alternative per tool) around each tool's arguments, whose
// rules come from the JSON Schema compiler through `schema_rules`. "auto" and
// "none" constrain nothing: the result is empty.
//
//   SchemaRulesFn rules = [](const nlohmann::ordered_json& schema, std::string_view prefix)
//       -> absl::StatusOr<std::string> { return JsonSchemaToGbnf(schema, prefix); };  // the schema
//       compiler
//   ODMOE_ASSIGN_OR_RETURN(std::string gbnf,
//       ToolCallGrammar(ToolCallSyntax::kHermes, req.tools, req.choice, req.parallel, rules));
//   // root ::= tool-calls
//   // tool-calls ::= tool-call ("\n" tool-call)*
//   // tool-call ::= tool-0 | tool-1
//   // tool-0 ::= "<tool_call>\n{\"name\": \"" "get_weather" "\", \"arguments\": " tool-0-args
//   "}\n</tool_call>"
//   // tool-0-args ::= ...   (schema_rules(parameters, "tool-0-args"))
//
// The contract with `schema_rules`: it returns GBNF rules (one per line, no
// `root`) among which one is named exactly `rule_prefix` and matches the JSON
// value; its other rules' names start with `rule_prefix` + "-". Rule names
// here are made of indices only, so any tool name is safe.
//
// Tagged syntaxes (qwen3_coder, glm45) get one rule per property in the
// order of the schema's "properties" (required ones mandatory, the others
// optional); a "string" property is raw text without "</" (its enum or const
// values as literals), the others take schema_rules(property, "tool-I-p-J-value"). A named choice
// is exactly one call to that tool; "required" is one call (or, with parallel, one or more) to any
// tool. The grammar starts at the reply's first byte: a reasoning model cannot think first under
// it.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "main_node/tool_call_syntax.h"
#include "main_node/tool_request.h"
#include "nlohmann/json.hpp"

namespace odmoe {

/// JSON Schema -> GBNF rules defining `rule_prefix` (see above).
using SchemaRulesFn = std::function<absl::StatusOr<std::string>(const nlohmann::ordered_json& schema,
                                                                std::string_view rule_prefix)>;

/// The grammar for `choice` (empty for auto and none). INVALID_ARGUMENT for a
/// named tool that `tools` lacks, "required" without tools, or a schema that
/// `schema_rules` refuses ("tools[1].function.parameters: ...").
/// `control_markers`: the syntax's markers that are control tokens of the
/// model's vocabulary (ToolCallControlMarkers): the grammar names those
/// tokens (`<|tool_call_begin|>`, grammar/grammar.h) where it would otherwise
/// spell their text, so the model writes its own marker tokens.
absl::StatusOr<std::string> ToolCallGrammar(ToolCallSyntax syntax,
                                            std::span<const ToolDefinition> tools,
                                            const ToolChoice& choice, bool parallel,
                                            const SchemaRulesFn& schema_rules,
                                            std::span<const std::string> control_markers = {});

/// `text` as one GBNF string literal ("\"a\\nb\"" for a, newline, b).
std::string GbnfLiteral(std::string_view text);

}  // namespace odmoe
