#include "main_node/tool_call_grammar.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/clip_for_message.h"

namespace odmoe {
namespace {

using json = nlohmann::ordered_json;

// `text` as GBNF, nothing for empty text (GBNF sequences need no ""):
// literals, and a token reference <T> (grammar.h) for each marker T in it
// that is a control token of the vocabulary (`control`).
std::string Lit(std::string_view text, std::span<const std::string> control = {}) {
  std::string out;
  size_t plain = 0;
  for (size_t i = 0; i < text.size();) {
    const std::string* hit = nullptr;
    for (const std::string& m : control) {
      if (!m.empty() && text.substr(i, m.size()) == m && (hit == nullptr || m.size() > hit->size()))
        hit = &m;
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > plain) absl::StrAppend(&out, GbnfLiteral(text.substr(plain, i - plain)), " ");
    absl::StrAppend(&out, *hit, " ");
    i += hit->size();
    plain = i;
  }
  if (plain < text.size()) absl::StrAppend(&out, GbnfLiteral(text.substr(plain)), " ");
  return out;
}

// The rule body of a "string" property written raw between tags: its enum
// or const as literals, else any text without "</". Empty for other types.
std::string RawStringRule(const json& property) {
  auto type = property.find("type");
  if (type == property.end() || !type->is_string() || *type != "string") return "";
  std::vector<std::string> literals;
  if (auto c = property.find("const"); c != property.end() && c->is_string()) {
    literals.push_back(GbnfLiteral(c->get<std::string>()));
  } else if (auto e = property.find("enum"); e != property.end() && e->is_array()) {
    for (const json& v : *e) {
      if (!v.is_string()) return "";
      literals.push_back(GbnfLiteral(v.get<std::string>()));
    }
  }
  if (literals.empty()) return "([^<] | \"<\" [^/])*";
  std::string alternatives;
  for (const std::string& l : literals)
    absl::StrAppend(&alternatives, alternatives.empty() ? "(" : " | ", l);
  return alternatives + ")";
}

// The rules of tool `index`'s arguments, defining tool-I-args.
absl::StatusOr<std::string> ArgumentRules(const ToolCallSyntaxSpec& spec,
                                          const ToolDefinition& tool, size_t index,
                                          const SchemaRulesFn& schema_rules,
                                          std::span<const std::string> control) {
  const std::string prefix = absl::StrCat("tool-", index, "-args");
  const std::string field = absl::StrCat("tools[", index, "].function.parameters");
  if (spec.args_shape == ToolCallArgsShape::kJson ||
      spec.name_shape == ToolCallNameShape::kJsonMember) {
    auto rules = schema_rules(tool.parameters, prefix);
    if (!rules.ok())
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", rules.status().message()));
    return *rules;
  }
  const ToolCallTags& tags = spec.tags;
  std::string rules;
  std::string sequence;
  std::vector<std::string> required;
  if (auto r = tool.parameters.find("required"); r != tool.parameters.end() && r->is_array()) {
    for (const json& name : *r) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  auto props = tool.parameters.find("properties");
  size_t j = 0;
  if (props != tool.parameters.end() && props->is_object()) {
    for (auto it = props->begin(); it != props->end(); ++it, ++j) {
      const std::string param = absl::StrCat("tool-", index, "-p-", j);
      std::string value;
      if (const std::string raw = RawStringRule(*it); !raw.empty()) {
        value = param + "-text";
        absl::StrAppend(&rules, value, " ::= ", raw, "\n");
      } else {
        value = param + "-value";
        auto sub = schema_rules(*it, value);
        if (!sub.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ".properties.", ClipForMessage(it.key()), ": ", sub.status().message()));
        }
        absl::StrAppend(&rules, *sub);
        if (!rules.empty() && rules.back() != '\n') rules += '\n';
      }
      absl::StrAppend(&rules, param, " ::= ", Lit(tags.key_open, control), GbnfLiteral(it.key()),
                      " ", Lit(tags.grammar_after_key, control), value, " ",
                      Lit(tags.grammar_after_value, control), "\n");
      const bool needed = std::find(required.begin(), required.end(), it.key()) != required.end();
      absl::StrAppend(&sequence, " ", param, needed ? "" : "?");
    }
  }
  absl::StrAppend(&rules, prefix, " ::=", sequence.empty() ? " \"\"" : sequence, "\n");
  return rules;
}

}  // namespace

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

absl::StatusOr<std::string> ToolCallGrammar(ToolCallSyntax syntax,
                                            std::span<const ToolDefinition> tools,
                                            const ToolChoice& choice, bool parallel,
                                            const SchemaRulesFn& schema_rules,
                                            std::span<const std::string> control_markers) {
  if (choice.kind == ToolChoiceKind::kAuto || choice.kind == ToolChoiceKind::kNone)
    return std::string();
  if (tools.empty())
    return absl::InvalidArgumentError(
        "tool_choice: \"required\" needs at least one tool in 'tools'");
  const ToolCallSyntaxSpec& spec = ToolCallSyntaxSpecOf(syntax);
  std::string rules;
  std::string alternatives;
  bool found = false;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& tool = tools[i];
    if (choice.kind == ToolChoiceKind::kNamed && tool.name != choice.name) continue;
    found = true;
    auto args = ArgumentRules(spec, tool, i, schema_rules, control_markers);
    if (!args.ok()) return args.status();
    const std::string name = absl::StrCat("tool-", i);
    absl::StrAppend(&rules, name, " ::= ", Lit(spec.grammar_call_open, control_markers),
                    GbnfLiteral(tool.name), " ", spec.grammar_name_index ? "\":\" [0-9]+ " : "",
                    Lit(spec.grammar_name_close, control_markers), name, "-args ",
                    Lit(spec.grammar_call_close, control_markers), "\n");
    absl::StrAppend(&rules, *args);
    if (!rules.empty() && rules.back() != '\n') rules += '\n';
    absl::StrAppend(&alternatives, alternatives.empty() ? "" : " | ", name);
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat("tool_choice: no tool named '", ClipForMessage(choice.name), "'"));
  }
  const bool many = parallel && choice.kind == ToolChoiceKind::kRequired;
  std::string head =
      absl::StrCat("root ::= ", Lit(spec.grammar_section_open, control_markers), "tool-calls ",
                   Lit(spec.grammar_section_close, control_markers), "\n");
  absl::StrAppend(
      &head, "tool-calls ::= tool-call",
      many ? absl::StrCat(" (", Lit(spec.grammar_separator, control_markers), "tool-call)*") : "",
      "\n");
  absl::StrAppend(&head, "tool-call ::= ", alternatives, "\n");
  std::string grammar = head + rules;
  // Lit's separating spaces at the ends of lines.
  for (size_t k = grammar.find(" \n"); k != std::string::npos; k = grammar.find(" \n", k))
    grammar.erase(k, 1);
  return grammar;
}

}  // namespace odmoe
