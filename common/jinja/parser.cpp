// Parse(): tokens -> the statement tree, with jinja2's grammar and operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons (== !=
// < <= > >= in, not in), + -, ~, * / // %, **, unary - +, then primaries with
// their postfixes (.attr, [index], [a:b:c], (call)), filters (|f) and tests
// (is [not] t).
#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "jinja/syntax.h"

namespace odmoe::jinja {
namespace {

using NodePtr = std::unique_ptr<Node>;

#define ODMOE_PARSE_TRY(expr)  \
  do {                         \
    absl::Status _st = (expr); \
    if (!_st.ok()) return _st; \
  } while (0)
#define ODMOE_PARSE_ASSIGN(lhs, expr)           \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

NodePtr MakeNode(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  absl::StatusOr<NodePtr> Run() {
    std::string end;
    auto body = Body({}, &end);
    if (!body.ok()) return body.status();
    if (Peek().kind != TokenKind::kEnd) return Error("unexpected token");
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kOperator && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == TokenKind::kName && Peek(ahead).text == name;
  }
  bool AcceptOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  absl::Status Error(const std::string& what) const {
    const Token& t = Peek();
    std::string near = t.kind == TokenKind::kEnd        ? "end of template"
                       : t.kind == TokenKind::kBlockEnd ? "'%}'"
                       : t.kind == TokenKind::kVarEnd   ? "'}}'"
                       : t.kind == TokenKind::kText     ? "text"
                                                        : "'" + t.text + "'";
    return absl::InvalidArgumentError(
        absl::StrCat("line ", t.line, ": ", what, " (at ", near, ")"));
  }
  absl::Status ExpectOp(std::string_view op) {
    if (AcceptOp(op)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", std::string(op), "'"));
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().kind != TokenKind::kName) return Error("expected a name");
    return Next().text;
  }
  absl::Status ExpectBlockEnd() {
    if (Peek().kind != TokenKind::kBlockEnd) return Error("expected '%}'");
    Next();
    return absl::OkStatus();
  }
  struct DepthGuard {
    explicit DepthGuard(int* d) : d(d) { ++*d; }
    ~DepthGuard() { --*d; }
    int* d;
  };
  absl::Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) return Error(absl::StrCat("nesting deeper than ", kMaxParseDepth));
    return absl::OkStatus();
  }

  // ---- statements ----

  // Statements until one of `ends` (a block tag name); *end gets which one
  // (the tag's name token is consumed, its arguments and %} are not).
  absl::StatusOr<NodePtr> Body(const std::set<std::string>& ends, std::string* end) {
    DepthGuard guard(&depth_);
    if (auto st = CheckDepth(); !st.ok()) return st;
    NodePtr body = MakeNode(NodeKind::kBody, Peek().line);
    while (true) {
      const Token& t = Peek();
      if (t.kind == TokenKind::kEnd) {
        if (ends.empty()) return body;
        std::string closing = *ends.begin();
        for (const std::string& e : ends) {
          if (e.rfind("end", 0) == 0) closing = e;
        }
        return Error(absl::StrCat("missing {% ", closing, " %}"));
      }
      if (t.kind == TokenKind::kText) {
        NodePtr n = MakeNode(NodeKind::kText, t.line);
        n->name = Next().text;
        body->a.push_back(std::move(n));
      } else if (t.kind == TokenKind::kVarBegin) {
        Next();
        NodePtr n = MakeNode(NodeKind::kOutput, t.line);
        auto e = Tuple();
        if (!e.ok()) return e.status();
        n->a.push_back(std::move(*e));
        if (Peek().kind != TokenKind::kVarEnd) return Error("expected '}}'");
        Next();
        body->a.push_back(std::move(n));
      } else if (t.kind == TokenKind::kBlockBegin) {
        const Token& tag = Peek(1);
        if (tag.kind == TokenKind::kName && ends.count(tag.text)) {
          Next();
          *end = Next().text;
          return body;
        }
        Next();
        auto s = Statement();
        if (!s.ok()) return s.status();
        if (*s) body->a.push_back(std::move(*s));
      } else {
        return Error("unexpected token");
      }
    }
  }

  absl::StatusOr<NodePtr> Statement() {
    const Token& tag = Peek();
    if (tag.kind != TokenKind::kName) return Error("expected a statement name");
    std::string name = Next().text;
    int line = tag.line;
    if (name == "if") return If(line);
    if (name == "for") return For(line);
    if (name == "set") return Set(line);
    if (name == "macro") return Macro(line);
    if (name == "call") return CallBlock(line);
    if (name == "filter") return FilterBlock(line);
    if (name == "with") return With(line);
    if (name == "generation") return Generation(line);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line, ": '", name, "' outside a loop"));
      }
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      return MakeNode(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, line);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ": unsupported tag '", name, "'"));
  }

  // "%}", the statements up to {% end_tag %} (appended to n->a), its "%}".
  absl::Status BlockBody(const char* end_tag, Node* n) {
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    std::string end;
    ODMOE_PARSE_ASSIGN(body, Body({end_tag}, &end));
    n->a.push_back(std::move(body));
    return ExpectBlockEnd();
  }

  absl::StatusOr<NodePtr> If(int line) {
    NodePtr n = MakeNode(NodeKind::kIf, line);
    while (true) {
      ODMOE_PARSE_ASSIGN(cond, Tuple());
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      std::string end;
      ODMOE_PARSE_ASSIGN(body, Body({"elif", "else", "endif"}, &end));
      n->a.push_back(std::move(cond));
      n->b.push_back(std::move(body));
      if (end == "elif") continue;
      if (end == "else") {
        ODMOE_PARSE_TRY(ExpectBlockEnd());
        ODMOE_PARSE_ASSIGN(else_body, Body({"endif"}, &end));
        n->b.push_back(std::move(else_body));
      }
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      return n;
    }
  }

  // Names separated by commas (optionally in parentheses): for and set targets.
  absl::StatusOr<std::vector<std::string>> Targets() {
    std::vector<std::string> names;
    bool paren = AcceptOp("(");
    do {
      if (paren && IsOp(")")) break;
      ODMOE_PARSE_ASSIGN(name, ExpectName());
      names.push_back(name);
    } while (AcceptOp(","));
    if (paren) ODMOE_PARSE_TRY(ExpectOp(")"));
    return names;
  }

  absl::StatusOr<NodePtr> For(int line) {
    NodePtr n = MakeNode(NodeKind::kFor, line);
    ODMOE_PARSE_ASSIGN(targets, Targets());
    n->names = std::move(targets);
    if (!AcceptName("in")) return Error("expected 'in'");
    ODMOE_PARSE_ASSIGN(iter, Tuple(/*with_condexpr=*/false));
    n->a.push_back(std::move(iter));
    if (AcceptName("if")) {
      ODMOE_PARSE_ASSIGN(cond, Expression());
      n->a.push_back(std::move(cond));
    } else {
      n->a.push_back(nullptr);
    }
    n->negated = AcceptName("recursive");
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    std::string end;
    ++loop_depth_;
    auto body = Body({"else", "endfor"}, &end);
    --loop_depth_;
    if (!body.ok()) return body.status();
    n->a.push_back(std::move(*body));
    if (end == "else") {
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      int saved = loop_depth_;
      loop_depth_ = 0;
      auto else_body = Body({"endfor"}, &end);
      loop_depth_ = saved;
      if (!else_body.ok()) return else_body.status();
      n->a.push_back(std::move(*else_body));
    } else {
      n->a.push_back(nullptr);
    }
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    return n;
  }

  absl::StatusOr<NodePtr> Set(int line) {
    if (Peek().kind == TokenKind::kName && IsOp(".", 1)) {
      NodePtr n = MakeNode(NodeKind::kSet, line);
      n->names.push_back(Next().text);
      Next();
      ODMOE_PARSE_ASSIGN(attr, ExpectName());
      n->attr = attr;
      ODMOE_PARSE_TRY(ExpectOp("="));
      ODMOE_PARSE_ASSIGN(value, Tuple());
      n->a.push_back(std::move(value));
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      return n;
    }
    ODMOE_PARSE_ASSIGN(targets, Targets());
    if (AcceptOp("=")) {
      NodePtr n = MakeNode(NodeKind::kSet, line);
      n->names = std::move(targets);
      ODMOE_PARSE_ASSIGN(value, Tuple());
      n->a.push_back(std::move(value));
      ODMOE_PARSE_TRY(ExpectBlockEnd());
      return n;
    }
    if (targets.size() != 1) return Error("expected '='");
    NodePtr n = MakeNode(NodeKind::kSetBlock, line);
    n->names = std::move(targets);
    ODMOE_PARSE_TRY(FilterChain(&n->b));
    ODMOE_PARSE_TRY(BlockBody("endset", n.get()));
    return n;
  }

  // Parameters with optional defaults: (a, b=1).
  absl::Status Parameters(Node* n) {
    ODMOE_PARSE_TRY(ExpectOp("("));
    while (!IsOp(")")) {
      if (!n->names.empty()) ODMOE_PARSE_TRY(ExpectOp(","));
      if (IsOp(")")) break;
      ODMOE_PARSE_ASSIGN(name, ExpectName());
      n->names.push_back(name);
      if (AcceptOp("=")) {
        ODMOE_PARSE_ASSIGN(def, Expression());
        n->c.push_back(std::move(def));
      } else {
        n->c.push_back(nullptr);
      }
    }
    return ExpectOp(")");
  }

  absl::StatusOr<NodePtr> Macro(int line) {
    NodePtr n = MakeNode(NodeKind::kMacro, line);
    ODMOE_PARSE_ASSIGN(name, ExpectName());
    n->name = name;
    ODMOE_PARSE_TRY(Parameters(n.get()));
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    std::string end;
    int saved = loop_depth_;
    loop_depth_ = 0;
    auto body = Body({"endmacro"}, &end);
    loop_depth_ = saved;
    if (!body.ok()) return body.status();
    n->a.push_back(std::move(*body));
    if (Peek().kind == TokenKind::kName) Next();  // {% endmacro name %}
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    return n;
  }

  absl::StatusOr<NodePtr> CallBlock(int line) {
    NodePtr n = MakeNode(NodeKind::kCallBlock, line);
    if (IsOp("(")) ODMOE_PARSE_TRY(Parameters(n.get()));
    ODMOE_PARSE_ASSIGN(call, Expression());
    if (call->kind != NodeKind::kCall) return Error("expected a call");
    n->a.push_back(std::move(call));
    ODMOE_PARSE_TRY(BlockBody("endcall", n.get()));
    return n;
  }

  // f | g(args) ...: filters with no input (a filter block, a block set).
  absl::Status FilterChain(std::vector<NodePtr>* out) {
    bool first = out->empty() && !IsOp("|");
    while (first || AcceptOp("|")) {
      if (first && Peek().kind != TokenKind::kName) return absl::OkStatus();
      first = false;
      ODMOE_PARSE_ASSIGN(f, FilterCall(nullptr));
      out->push_back(std::move(f));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> FilterBlock(int line) {
    NodePtr n = MakeNode(NodeKind::kFilterBlock, line);
    ODMOE_PARSE_TRY(FilterChain(&n->b));
    if (n->b.empty()) return Error("expected a filter name");
    ODMOE_PARSE_TRY(BlockBody("endfilter", n.get()));
    return n;
  }

  absl::StatusOr<NodePtr> With(int line) {
    NodePtr n = MakeNode(NodeKind::kWith, line);
    while (Peek().kind != TokenKind::kBlockEnd) {
      if (!n->names.empty()) ODMOE_PARSE_TRY(ExpectOp(","));
      ODMOE_PARSE_ASSIGN(name, ExpectName());
      n->names.push_back(name);
      ODMOE_PARSE_TRY(ExpectOp("="));
      ODMOE_PARSE_ASSIGN(value, Expression());
      n->c.push_back(std::move(value));
    }
    ODMOE_PARSE_TRY(BlockBody("endwith", n.get()));
    return n;
  }

  // transformers' {% generation %} tag: its body renders as is.
  absl::StatusOr<NodePtr> Generation(int line) {
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    std::string end;
    ODMOE_PARSE_ASSIGN(body, Body({"endgeneration"}, &end));
    body->line = line;
    ODMOE_PARSE_TRY(ExpectBlockEnd());
    return body;
  }

  // ---- expressions ----

  // Expressions separated by commas: a tuple when there is a comma.
  absl::StatusOr<NodePtr> Tuple(bool with_condexpr = true) {
    int line = Peek().line;
    ODMOE_PARSE_ASSIGN(first, with_condexpr ? Expression() : Or());
    if (!IsOp(",")) return first;
    NodePtr n = MakeNode(NodeKind::kTuple, line);
    n->a.push_back(std::move(first));
    while (AcceptOp(",")) {
      if (Peek().kind == TokenKind::kBlockEnd || Peek().kind == TokenKind::kVarEnd) break;
      ODMOE_PARSE_ASSIGN(e, with_condexpr ? Expression() : Or());
      n->a.push_back(std::move(e));
    }
    return n;
  }

  absl::StatusOr<NodePtr> Expression() {
    DepthGuard guard(&depth_);
    if (auto st = CheckDepth(); !st.ok()) return st;
    ODMOE_PARSE_ASSIGN(value, Or());
    while (IsName("if")) {
      int line = Next().line;
      NodePtr n = MakeNode(NodeKind::kCondExpr, line);
      ODMOE_PARSE_ASSIGN(cond, Or());
      NodePtr otherwise;
      if (AcceptName("else")) {
        ODMOE_PARSE_ASSIGN(e, Expression());
        otherwise = std::move(e);
      }
      n->a.push_back(std::move(value));
      n->a.push_back(std::move(cond));
      n->a.push_back(std::move(otherwise));
      value = std::move(n);
    }
    return value;
  }

  // A left-associative level of binary operators: `next` operands joined by
  // any of `ops` (operator tokens, or names such as "and").
  template <typename Operand>
  absl::StatusOr<NodePtr> LeftAssociative(std::initializer_list<const char*> ops, Operand next) {
    ODMOE_PARSE_ASSIGN(left, next());
    while (true) {
      const Token& t = Peek();
      const bool match = std::any_of(ops.begin(), ops.end(), [&](const char* op) {
        return (t.kind == TokenKind::kOperator || t.kind == TokenKind::kName) && t.text == op;
      });
      if (!match) return left;
      Next();
      NodePtr n = MakeNode(NodeKind::kBinary, t.line);
      n->name = t.text;
      ODMOE_PARSE_ASSIGN(right, next());
      n->a.push_back(std::move(left));
      n->a.push_back(std::move(right));
      left = std::move(n);
    }
  }

  absl::StatusOr<NodePtr> Or() {
    return LeftAssociative({"or"},
                           [this] { return LeftAssociative({"and"}, [this] { return Not(); }); });
  }

  absl::StatusOr<NodePtr> Not() {
    if (IsName("not")) {
      DepthGuard guard(&depth_);
      if (auto st = CheckDepth(); !st.ok()) return st;
      int line = Next().line;
      NodePtr n = MakeNode(NodeKind::kUnary, line);
      n->name = "not";
      ODMOE_PARSE_ASSIGN(x, Not());
      n->a.push_back(std::move(x));
      return n;
    }
    return Compare();
  }

  absl::StatusOr<NodePtr> Compare() {
    int line = Peek().line;
    ODMOE_PARSE_ASSIGN(first, Add());
    NodePtr n;
    while (true) {
      std::string op;
      if (Peek().kind == TokenKind::kOperator &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
           Peek().text == "<=" || Peek().text == ">" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        Next();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Next();
        Next();
        op = "notin";
      } else {
        break;
      }
      if (!n) {
        n = MakeNode(NodeKind::kCompare, line);
        n->a.push_back(std::move(first));
      }
      ODMOE_PARSE_ASSIGN(operand, Add());
      n->names.push_back(op);
      n->b.push_back(std::move(operand));
    }
    if (n) return n;
    return first;
  }

  // + - (lowest), ~, * / // %, ** (highest), then the unary operators.
  absl::StatusOr<NodePtr> Add() {
    auto pow = [this] { return LeftAssociative({"**"}, [this] { return Unary(true); }); };
    auto mul = [this, pow] { return LeftAssociative({"*", "/", "//", "%"}, pow); };
    auto concat = [this, mul] { return LeftAssociative({"~"}, mul); };
    return LeftAssociative({"+", "-"}, concat);
  }

  absl::StatusOr<NodePtr> Unary(bool with_filter) {
    DepthGuard guard(&depth_);
    if (auto st = CheckDepth(); !st.ok()) return st;
    NodePtr node;
    if (IsOp("-") || IsOp("+")) {
      const Token& t = Next();
      node = MakeNode(NodeKind::kUnary, t.line);
      node->name = t.text;
      ODMOE_PARSE_ASSIGN(x, Unary(false));
      node->a.push_back(std::move(x));
    } else {
      ODMOE_PARSE_ASSIGN(p, Primary());
      ODMOE_PARSE_ASSIGN(q, Postfix(std::move(p)));
      node = std::move(q);
    }
    if (with_filter) return FilterExpr(std::move(node));
    return node;
  }

  absl::StatusOr<NodePtr> Primary() {
    const Token& t = Peek();
    switch (t.kind) {
      case TokenKind::kName: {
        Next();
        NodePtr n = MakeNode(NodeKind::kConst, t.line);
        if (t.text == "true" || t.text == "True") {
          n->value = Value::Bool(true);
        } else if (t.text == "false" || t.text == "False") {
          n->value = Value::Bool(false);
        } else if (t.text == "none" || t.text == "None") {
          n->value = Value::None();
        } else {
          n->kind = NodeKind::kName;
          n->name = t.text;
        }
        return n;
      }
      case TokenKind::kString: {
        Next();
        NodePtr n = MakeNode(NodeKind::kConst, t.line);
        std::string s = t.text;
        while (Peek().kind == TokenKind::kString) s += Next().text;  // "a" "b"
        n->value = Value::String(std::move(s));
        return n;
      }
      case TokenKind::kInt: {
        Next();
        NodePtr n = MakeNode(NodeKind::kConst, t.line);
        errno = 0;
        long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) return Error("integer literal out of range");
        n->value = Value::Int(v);
        return n;
      }
      case TokenKind::kFloat: {
        Next();
        NodePtr n = MakeNode(NodeKind::kConst, t.line);
        n->value = Value::Float(std::strtod(t.text.c_str(), nullptr));
        return n;
      }
      case TokenKind::kOperator:
        if (t.text == "(") {
          Next();
          if (AcceptOp(")")) return MakeNode(NodeKind::kTuple, t.line);
          ODMOE_PARSE_ASSIGN(first, Expression());
          if (AcceptOp(")")) return first;
          NodePtr n = MakeNode(NodeKind::kTuple, t.line);
          n->a.push_back(std::move(first));
          while (AcceptOp(",")) {
            if (IsOp(")")) break;
            ODMOE_PARSE_ASSIGN(e, Expression());
            n->a.push_back(std::move(e));
          }
          ODMOE_PARSE_TRY(ExpectOp(")"));
          return n;
        }
        if (t.text == "[") {
          Next();
          NodePtr n = MakeNode(NodeKind::kList, t.line);
          while (!IsOp("]")) {
            if (!n->a.empty()) ODMOE_PARSE_TRY(ExpectOp(","));
            if (IsOp("]")) break;
            ODMOE_PARSE_ASSIGN(e, Expression());
            n->a.push_back(std::move(e));
          }
          Next();
          return n;
        }
        if (t.text == "{") {
          Next();
          NodePtr n = MakeNode(NodeKind::kDict, t.line);
          while (!IsOp("}")) {
            if (!n->a.empty()) ODMOE_PARSE_TRY(ExpectOp(","));
            if (IsOp("}")) break;
            ODMOE_PARSE_ASSIGN(k, Expression());
            ODMOE_PARSE_TRY(ExpectOp(":"));
            ODMOE_PARSE_ASSIGN(v, Expression());
            n->a.push_back(std::move(k));
            n->b.push_back(std::move(v));
          }
          Next();
          return n;
        }
        break;
      default:
        break;
    }
    return Error("expected an expression");
  }

  absl::Status CallArguments(Node* n) {
    // After '(': positional, then name=value.
    while (!IsOp(")")) {
      if (!n->b.empty() || !n->c.empty()) ODMOE_PARSE_TRY(ExpectOp(","));
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Error("*args and **kwargs are not supported");
      if (Peek().kind == TokenKind::kName && IsOp("=", 1)) {
        n->names.push_back(Next().text);
        Next();
        ODMOE_PARSE_ASSIGN(v, Expression());
        n->c.push_back(std::move(v));
      } else {
        if (!n->c.empty()) return Error("a positional argument after a keyword argument");
        ODMOE_PARSE_ASSIGN(v, Expression());
        n->b.push_back(std::move(v));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> Postfix(NodePtr node) {
    while (true) {
      const Token& t = Peek();
      if (IsOp(".")) {
        Next();
        const Token& attr = Peek();
        if (attr.kind == TokenKind::kName) {
          NodePtr n = MakeNode(NodeKind::kGetAttr, attr.line);
          n->name = Next().text;
          n->a.push_back(std::move(node));
          node = std::move(n);
        } else if (attr.kind == TokenKind::kInt) {
          NodePtr n = MakeNode(NodeKind::kGetItem, attr.line);
          NodePtr index = MakeNode(NodeKind::kConst, attr.line);
          index->value = Value::Int(std::strtoll(Next().text.c_str(), nullptr, 10));
          n->a.push_back(std::move(node));
          n->a.push_back(std::move(index));
          node = std::move(n);
        } else {
          return Error("expected an attribute name");
        }
      } else if (IsOp("[")) {
        Next();
        NodePtr n = MakeNode(NodeKind::kGetItem, t.line);
        n->a.push_back(std::move(node));
        ODMOE_PARSE_ASSIGN(index, Subscript());
        n->a.push_back(std::move(index));
        ODMOE_PARSE_TRY(ExpectOp("]"));
        node = std::move(n);
      } else if (IsOp("(")) {
        Next();
        NodePtr n = MakeNode(NodeKind::kCall, t.line);
        n->a.push_back(std::move(node));
        ODMOE_PARSE_TRY(CallArguments(n.get()));
        node = std::move(n);
      } else {
        return node;
      }
    }
  }

  // The inside of [...]: an index or a slice a:b:c.
  absl::StatusOr<NodePtr> Subscript() {
    int line = Peek().line;
    NodePtr start;
    if (!IsOp(":")) {
      ODMOE_PARSE_ASSIGN(e, Expression());
      if (!IsOp(":")) return e;
      start = std::move(e);
    }
    NodePtr n = MakeNode(NodeKind::kSlice, line);
    n->a.push_back(std::move(start));
    Next();  // ':'
    NodePtr stop, step;
    if (!IsOp("]") && !IsOp(":")) {
      ODMOE_PARSE_ASSIGN(e, Expression());
      stop = std::move(e);
    }
    if (AcceptOp(":") && !IsOp("]")) {
      ODMOE_PARSE_ASSIGN(e, Expression());
      step = std::move(e);
    }
    n->a.push_back(std::move(stop));
    n->a.push_back(std::move(step));
    return n;
  }

  // name[(args)] after '|'.
  absl::StatusOr<NodePtr> FilterCall(NodePtr input) {
    int line = Peek().line;
    NodePtr n = MakeNode(NodeKind::kFilter, line);
    ODMOE_PARSE_ASSIGN(name, ExpectName());
    n->name = name;
    while (IsOp(".")) {  // dotted filter names
      Next();
      ODMOE_PARSE_ASSIGN(part, ExpectName());
      n->name += "." + part;
    }
    n->a.push_back(std::move(input));
    if (AcceptOp("(")) ODMOE_PARSE_TRY(CallArguments(n.get()));
    return n;
  }

  absl::StatusOr<NodePtr> FilterExpr(NodePtr node) {
    while (true) {
      if (AcceptOp("|")) {
        ODMOE_PARSE_ASSIGN(f, FilterCall(std::move(node)));
        node = std::move(f);
      } else if (IsName("is")) {
        int line = Next().line;
        NodePtr n = MakeNode(NodeKind::kTest, line);
        n->negated = AcceptName("not");
        ODMOE_PARSE_ASSIGN(name, ExpectName());
        n->name = name;
        n->a.push_back(std::move(node));
        const Token& t = Peek();
        if (IsOp("(")) {
          Next();
          ODMOE_PARSE_TRY(CallArguments(n.get()));
        } else if ((t.kind == TokenKind::kName || t.kind == TokenKind::kString ||
                    t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) return Error("tests cannot be chained with 'is'");
          ODMOE_PARSE_ASSIGN(p, Primary());
          ODMOE_PARSE_ASSIGN(arg, Postfix(std::move(p)));
          n->b.push_back(std::move(arg));
        }
        node = std::move(n);
      } else if (IsOp("(")) {
        int line = Next().line;
        NodePtr n = MakeNode(NodeKind::kCall, line);
        n->a.push_back(std::move(node));
        ODMOE_PARSE_TRY(CallArguments(n.get()));
        node = std::move(n);
      } else {
        return node;
      }
    }
  }

#undef ODMOE_PARSE_TRY
#undef ODMOE_PARSE_ASSIGN

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> Parse(const std::vector<Token>& tokens) {
  return Parser(tokens).Run();
}

}  // namespace odmoe::jinja
