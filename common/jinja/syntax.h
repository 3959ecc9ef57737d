// A Jinja template's syntax: the lexer's tokens and the parser's tree.
//
// Lex() applies the whitespace rules of the environment transformers
// configures (trim_blocks: the first newline after a block tag or comment is
// removed; lstrip_blocks: spaces and tabs before a block tag or comment at the
// start of a line are removed; `{%-`/`-%}` strip all whitespace on that side,
// `{%+`/`+%}` keep it) and jinja2's source rules (newlines normalised to
// "\n", one trailing newline dropped). Parse() builds the tree the
// interpreter runs (interpreter.h). Both fail with INVALID_ARGUMENT
// "line N: ..." (Template::Compile adds the template's name).
//
//   ODMOE_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex("{% if x %}y{% endif %}"));
//   ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, Parse(tokens));
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/value.h"

namespace odmoe::jinja {

enum class TokenKind {
  kText,        // template data between tags (already stripped)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOperator,  // text holds it: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line = 1;
};

absl::StatusOr<std::vector<Token>> Lex(std::string_view source);

enum class NodeKind {
  // Expressions.
  kConst,     // value
  kName,      // name
  kList,      // a = items
  kTuple,     // a = items
  kDict,      // a = keys, b = values
  kGetAttr,   // a[0] = object, name
  kGetItem,   // a[0] = object, a[1] = index
  kSlice,     // a = start, stop, step (null where left out)
  kCall,      // a[0] = callee, b = positional, names/c = keyword
  kFilter,    // name, a[0] = input (null in a filter block), b = positional, names/c = keyword
  kTest,      // name, a[0] = input, b = positional, negated
  kUnary,     // op (- + not), a[0]
  kBinary,    // op (+ - * / // % ** ~ and or), a[0], a[1]
  kCompare,   // a[0] first, b = operands, names = operators (== != < <= > >= in notin)
  kCondExpr,  // a[0] = value, a[1] = condition, a[2] = else (null: undefined)
  // Statements.
  kBody,         // a = statements
  kText,         // text
  kOutput,       // a[0] = expression
  kIf,           // a = conditions, b = bodies (one more than conditions with an else)
  kFor,          // names = targets, a[0] = iterable, a[1] = filter (or null), a[2] = body,
                 // a[3] = else body (or null), negated = recursive
  kSet,          // names = targets (or name + attr for ns.attr), a[0] = value
  kSetBlock,     // names = target, a[0] = body, b = filters (kFilter with null input)
  kMacro,        // name, names = parameters, c = defaults (null where none), a[0] = body
  kCallBlock,    // a[0] = the call, a[1] = body, names/c = caller's parameters
  kFilterBlock,  // a[0] = body, b = filters
  kWith,         // names = targets, c = values, a[0] = body
  kBreak,
  kContinue,
};

struct Node {
  NodeKind kind;
  int line = 1;
  std::string name;  // a name, an attribute, a filter or test, an operator, text
  std::string attr;  // kSet: the attribute of `set ns.attr = ...` (empty otherwise)
  Value value;
  bool negated = false;
  std::vector<std::unique_ptr<Node>> a, b, c;
  std::vector<std::string> names;
};

/// The template's statement tree (kind kBody).
absl::StatusOr<std::unique_ptr<Node>> Parse(const std::vector<Token>& tokens);

/// The deepest expression or statement nesting Parse accepts.
inline constexpr int kMaxParseDepth = 128;

}  // namespace odmoe::jinja
