#include "main_node/output_grammar.h"

#include <vector>

#include "grammar/json_schema.h"
#include "main_node/tool_call_grammar.h"

namespace odmoe {
namespace {

using json = nlohmann::ordered_json;

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(field + ": " + what);
}

// A schema's grammar, its errors under `field` ("json_schema /properties/x: ...").
absl::StatusOr<std::string> SchemaGrammar(const json& schema, const std::string& field,
                                          bool strict) {
  if (!schema.is_object() && !schema.is_boolean()) return Bad(field, "expected an object");
  JsonSchemaOptions options;
  options.strict = strict;
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema, options);
  if (gbnf.ok()) return gbnf;
  std::string message(gbnf.status().message());
  // JsonSchemaToGbnf names the schema "json_schema"; the request may have
  // sent it elsewhere.
  if (message.rfind("json_schema", 0) == 0) message.erase(0, 11);
  return absl::InvalidArgumentError(field + message);
}

absl::StatusOr<std::string> ResponseFormatGrammar(const json& format) {
  if (!format.is_object()) return Bad("response_format", "expected an object");
  const auto type = format.find("type");
  if (type == format.end() || !type->is_string()) {
    return Bad("response_format.type", "expected one of text, json_object, json_schema");
  }
  const std::string kind = type->get<std::string>();
  if (kind == "text") return std::string();
  if (kind == "json_object") {
    // llama-server's extension: a schema inside json_object.
    if (auto s = format.find("schema"); s != format.end() && !s->is_null()) {
      return SchemaGrammar(*s, "response_format.schema", /*strict=*/true);
    }
    return JsonObjectGbnf();
  }
  if (kind != "json_schema") {
    return Bad("response_format.type", "expected one of text, json_object, json_schema");
  }
  const auto spec = format.find("json_schema");
  if (spec == format.end() || !spec->is_object()) {
    return Bad("response_format.json_schema", "expected an object with a schema");
  }
  // strict false still gets a grammar (vLLM and llama-server enforce every
  // schema); it only lets objects take properties the schema does not name,
  // as JSON Schema does by default.
  bool strict = false;
  if (auto s = spec->find("strict"); s != spec->end() && !s->is_null()) {
    if (!s->is_boolean()) return Bad("response_format.json_schema.strict", "expected a boolean");
    strict = s->get<bool>();
  }
  const auto schema = spec->find("schema");
  if (schema == spec->end() || schema->is_null()) return JsonObjectGbnf();
  return SchemaGrammar(*schema, "response_format.json_schema.schema", strict);
}

}  // namespace

absl::StatusOr<std::string> OutputGrammar(const json& body, const ToolRequest& tools,
                                          ToolCallSyntax syntax, const HasTokenFn& is_control) {
  struct Source {
    const char* field;
    std::string grammar;
  };
  std::vector<Source> asked;
  if (auto g = body.find("grammar"); g != body.end() && !g->is_null()) {
    if (!g->is_string()) return Bad("grammar", "expected GBNF text");
    if (!g->get_ref<const std::string&>().empty())
      asked.push_back({"grammar", g->get<std::string>()});
  }
  if (auto s = body.find("json_schema"); s != body.end() && !s->is_null()) {
    absl::StatusOr<std::string> g = SchemaGrammar(*s, "json_schema", /*strict=*/true);
    if (!g.ok()) return g.status();
    asked.push_back({"json_schema", std::move(*g)});
  }
  if (auto f = body.find("response_format"); f != body.end() && !f->is_null()) {
    absl::StatusOr<std::string> g = ResponseFormatGrammar(*f);
    if (!g.ok()) return g.status();
    if (!g->empty()) asked.push_back({"response_format", std::move(*g)});
  }
  if (tools.choice.kind == ToolChoiceKind::kRequired ||
      tools.choice.kind == ToolChoiceKind::kNamed) {
    auto rules = [](const json& schema, std::string_view prefix) -> absl::StatusOr<std::string> {
      JsonSchemaOptions options;
      options.root_rule = std::string(prefix);
      options.rule_prefix = std::string(prefix) + "-";
      return JsonSchemaToGbnf(schema, options);
    };
    absl::StatusOr<std::string> g =
        ToolCallGrammar(syntax, tools.tools, tools.choice, tools.parallel, rules,
                        ToolCallControlMarkers(syntax, is_control));
    if (!g.ok()) return g.status();
    asked.push_back({"tool_choice", std::move(*g)});
  }
  if (asked.empty()) return std::string();
  if (asked.size() > 1) {
    return Bad(asked[1].field, std::string("cannot be combined with ") + asked[0].field +
                                   " (each one fixes the output's form)");
  }
  return std::move(asked[0].grammar);
}

}  // namespace odmoe
