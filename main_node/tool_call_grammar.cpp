#include "main_node/tool_call_grammar.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "main_node/gemma_call_args.h"
#include "util/clip_for_message.h"
#include "util/status_macros.h"

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

// Any text without "</" (between tags), without "<|" (between Gemma's marks).
constexpr std::string_view kTagFreeText = "([^<] | \"<\" [^/])*";
constexpr std::string_view kGemmaFreeText = "([^<] | \"<\" [^|])*";

// The rule body of a "string" property written raw between marks: its enum
// or const as literals, else `free_text`. Empty for other types.
std::string RawStringRule(const json& property, std::string_view free_text) {
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
  if (literals.empty()) return std::string(free_text);
  std::string alternatives;
  for (const std::string& l : literals)
    absl::StrAppend(&alternatives, alternatives.empty() ? "(" : " | ", l);
  return alternatives + ")";
}

// The names a schema's "required" lists.
std::vector<std::string> RequiredOf(const json& parameters) {
  std::vector<std::string> out;
  if (auto r = parameters.find("required"); r != parameters.end() && r->is_array()) {
    for (const json& name : *r) {
      if (name.is_string()) out.push_back(name.get<std::string>());
    }
  }
  return out;
}

// A property's value rule `value` (its rules appended to `rules`): a string
// raw between `open` and `close` marks (RawStringRule), else the schema's
// JSON rules.
absl::Status ValueRule(const json& property, const std::string& value, std::string_view open,
                       std::string_view close, std::string_view free_text,
                       const SchemaRulesFn& schema_rules, std::span<const std::string> control,
                       const std::string& field, std::string* rules) {
  if (const std::string raw = RawStringRule(property, free_text); !raw.empty()) {
    absl::StrAppend(rules, value, " ::= ", Lit(open, control), "(", raw, ") ", Lit(close, control),
                    "\n");
    return absl::OkStatus();
  }
  auto sub = schema_rules(property, value);
  if (!sub.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", sub.status().message()));
  absl::StrAppend(rules, *sub);
  if (!rules->empty() && rules->back() != '\n') *rules += '\n';
  return absl::OkStatus();
}

// Gemma 4's arguments: {key:value,...} with the properties in sorted order
// (as its template writes them), the required ones always, the others
// optional; string values between <|"|> marks, other values as JSON (which
// the parser reads too: gemma_call_args.h). Rules prefix-t-J: the members
// from J on while none has been written, prefix-u-J: after one has.
absl::StatusOr<std::string> GemmaArgumentRules(const ToolDefinition& tool, size_t index,
                                               const SchemaRulesFn& schema_rules,
                                               std::span<const std::string> control) {
  const std::string prefix = absl::StrCat("tool-", index, "-args");
  const std::string field = absl::StrCat("tools[", index, "].function.parameters");
  const std::vector<std::string> required = RequiredOf(tool.parameters);
  std::vector<std::pair<std::string, const json*>> props;
  if (auto p = tool.parameters.find("properties"); p != tool.parameters.end() && p->is_object()) {
    for (auto it = p->begin(); it != p->end(); ++it) props.emplace_back(it.key(), &*it);
  }
  std::sort(props.begin(), props.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string rules;
  const size_t n = props.size();
  for (size_t j = 0; j < n; ++j) {
    const std::string& key = props[j].first;
    const std::string member = absl::StrCat(prefix, "-m-", j);
    const std::string value = member + "-value";
    ODMOE_RETURN_IF_ERROR(ValueRule(*props[j].second, value, kGemmaQuote, kGemmaQuote,
                                    kGemmaFreeText, schema_rules, control,
                                    absl::StrCat(field, ".properties.", ClipForMessage(key)),
                                    &rules));
    // A key Gemma can write bare, else between marks.
    const bool bare = !key.empty() && key.find_first_of(":,{}[]\"<> \t\n") == std::string::npos;
    std::string key_rule = bare ? GbnfLiteral(key)
                                : absl::StrCat(Lit(kGemmaQuote, control), GbnfLiteral(key), " ",
                                               Lit(kGemmaQuote, control));
    while (key_rule.back() == ' ') key_rule.pop_back();
    absl::StrAppend(&rules, member, " ::= ", key_rule, " \":\" ", value, "\n");
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    const std::string t = absl::StrCat(prefix, "-t-", j), u = absl::StrCat(prefix, "-u-", j);
    const std::string t_next = absl::StrCat(prefix, "-t-", j + 1);
    const std::string u_next = absl::StrCat(prefix, "-u-", j + 1);
    absl::StrAppend(&rules, t, " ::= ", member, " ", u_next, needed ? "" : " | " + t_next, "\n");
    absl::StrAppend(&rules, u, " ::= ", needed ? "" : "(", "\",\" ", member, needed ? " " : ")? ",
                    u_next, "\n");
  }
  absl::StrAppend(&rules, prefix, "-t-", n, " ::= \"\"\n", prefix, "-u-", n, " ::= \"\"\n");
  absl::StrAppend(&rules, prefix, " ::= \"{\" ", prefix, "-t-0 \"}\"\n");
  return rules;
}

// The rules of tool `index`'s arguments, defining tool-I-args.
absl::StatusOr<std::string> ArgumentRules(const ToolCallSyntaxSpec& spec,
                                          const ToolDefinition& tool, size_t index,
                                          const SchemaRulesFn& schema_rules,
                                          std::span<const std::string> control) {
  if (spec.args_shape == ToolCallArgsShape::kGemma) {
    return GemmaArgumentRules(tool, index, schema_rules, control);
  }
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
  const std::vector<std::string> required = RequiredOf(tool.parameters);
  auto props = tool.parameters.find("properties");
  size_t j = 0;
  if (props != tool.parameters.end() && props->is_object()) {
    for (auto it = props->begin(); it != props->end(); ++it, ++j) {
      const std::string param = absl::StrCat("tool-", index, "-p-", j);
      const std::string value = param + "-value";
      ODMOE_RETURN_IF_ERROR(ValueRule(*it, value, "", "", kTagFreeText, schema_rules, control,
                                      absl::StrCat(field, ".properties.", ClipForMessage(it.key())),
                                      &rules));
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
