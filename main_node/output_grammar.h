// What a request asks its output to look like, as one grammar (GBNF,
// grammar/grammar.h) that the engine enforces token by token
// (GenerateRequest::grammar): llama-server's `grammar` (GBNF text) and
// `json_schema` fields, OpenAI's `response_format` (json_object, json_schema)
// and the tool call a chat request requires (tool_choice "required" or a
// named function, in the model's own call syntax: tool_call_grammar.h).
// Nothing asked: an empty grammar. More than one of them: INVALID_ARGUMENT
// naming the second, as no two can hold at once.
//
//   nlohmann::ordered_json body = ...;   // parsed in order: properties keep their order
//   ODMOE_ASSIGN_OR_RETURN(ToolRequest tools, ParseToolRequest(body));
//   ODMOE_ASSIGN_OR_RETURN(request.grammar,
//                          OutputGrammar(body, tools, ToolCallSyntax::kHermes));
//   // {"response_format": {"type": "json_schema", "json_schema": {"name": "w",
//   //   "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}}}
//   //   -> root ::= "{" ws "\"city\"" ...
//
// Errors name the field: "response_format.type: expected one of text,
// json_object, json_schema", "response_format.json_schema.schema /properties/x:
// 'not' is not supported", "json_schema: expected an object". A GBNF text's own
// errors come from the engine's check of the request (PreparePrompt:
// "grammar: grammar line 2 column 5: ...").
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "main_node/tool_call_syntax.h"
#include "main_node/tool_request.h"
#include "nlohmann/json.hpp"

namespace odmoe {

/// The grammar `body` asks for (empty: none). `tools` is the body's
/// ParseToolRequest (empty for a completion); `syntax` the model's call
/// syntax; `is_control` says which texts are control tokens of the model's
/// vocabulary (a required call names its control-token markers as tokens).
absl::StatusOr<std::string> OutputGrammar(const nlohmann::ordered_json& body,
                                          const ToolRequest& tools, ToolCallSyntax syntax,
                                          const HasTokenFn& is_control = {});

}  // namespace odmoe
