#include "jinja/interpreter.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace odmoe::jinja {
namespace {

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

// Python's floor division and modulo on integers.
int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

absl::Status TypeError(const std::string& op, const Value& a, const Value& b) {
  return Bad(absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '",
                          b.TypeName(), "'"));
}

absl::Status UndefinedError(const Value& v) {
  return Bad(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

absl::StatusOr<Value> ArithmeticImpl(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "+") {
    if (a.is_markup() || b.is_markup()) {  // Markup + str escapes the str
      if ((a.is_string() || a.is_markup()) && (b.is_string() || b.is_markup())) {
        return Value::Markup((a.is_markup() ? a.AsString() : HtmlEscape(a.AsString())) +
                             (b.is_markup() ? b.AsString() : HtmlEscape(b.AsString())));
      }
    }
    if (a.is_string() && b.is_string()) return Value::String(a.AsString() + b.AsString());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() &&
        !b.is_generator()) {
      ValueList items = a.AsList();
      items.insert(items.end(), b.AsList().begin(), b.AsList().end());
      return Value::List(std::move(items), a.is_tuple());
    }
  }
  if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list())) {
    const Value& seq = (a.is_string() || a.is_list()) ? a : b;
    const Value& count = (a.is_string() || a.is_list()) ? b : a;
    if (!count.is_int() && !count.is_bool()) return TypeError(op, a, b);
    int64_t n = std::max<int64_t>(0, count.AsInt());
    size_t unit = seq.is_string() ? seq.AsString().size() : seq.AsList().size();
    if (unit != 0 && n > static_cast<int64_t>((size_t{64} << 20) / unit))
      return Bad("repetition too large");
    if (seq.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.AsString();
      return Value::String(out);
    }
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.AsList().begin(), seq.AsList().end());
    return Value::List(std::move(out), seq.is_tuple());
  }
  if (op == "%" && a.is_string()) return PercentFormat(a.AsString(), b);
  if (!a.is_number() || !b.is_number()) return TypeError(op, a, b);
  bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.AsFloat() == 0) return Bad("division by zero");
    return Value::Float(a.AsFloat() / b.AsFloat());
  }
  if (floats) {
    double x = a.AsFloat(), y = b.AsFloat();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "**") return Value::Float(std::pow(x, y));
    if (y == 0) return Bad("float division by zero");
    if (op == "//") return Value::Float(std::floor(x / y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Float(m);
    }
  } else {
    int64_t x = a.AsInt(), y = b.AsInt(), r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::Int(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::Int(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::Int(r);
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return Bad("integer overflow");
        if (result == 0 || result == 1) break;
      }
      return Value::Int(result);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return Bad("integer division or modulo by zero");
      return Value::Int(op == "//" ? FloorDiv(x, y) : FloorMod(x, y));
    }
    return Bad("integer overflow");
  }
  return Bad(absl::StrCat("unknown operator ", op));
}

}  // namespace

// Python's "%" formatting of a str (%s %r %d %i %f %%).
absl::StatusOr<Value> PercentFormat(const std::string& fmt, const Value& args) {
  ValueList list = args.is_tuple() ? args.AsList() : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return Bad("incomplete format");
    char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= list.size()) return Bad("not enough arguments for format string");
    const Value& v = list[next++];
    if (c == 's') {
      out += v.Str();
    } else if (c == 'r') {
      out += v.Repr();
    } else if ((c == 'd' || c == 'i') && v.is_number()) {
      out += std::to_string(v.is_float() ? static_cast<int64_t>(v.AsFloat()) : v.AsInt());
    } else if (c == 'f' && v.is_number()) {
      out += absl::StrFormat("%f", v.AsFloat());
    } else {
      return Bad(absl::StrCat("unsupported format character '", std::string(1, c), "'"));
    }
  }
  if (next < list.size()) return Bad("not all arguments converted during string formatting");
  return Value::String(out);
}

const Value* Frame::Lookup(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(const RenderLimits& limits)
    : limits_(limits), globals_(std::make_shared<Frame>()) {}

Interpreter::~Interpreter() {
  for (const auto& weak : captured_frames_) {
    if (auto f = weak.lock()) f->vars.clear();
  }
  for (const auto& weak : assigned_namespaces_) {
    if (auto d = weak.lock()) {
      d->items.clear();
      d->call.reset();
    }
  }
  globals_->vars.clear();
}

absl::Status Interpreter::Run(const Node& root, std::string* out) {
  auto frame = std::make_shared<Frame>();
  frame->parent = globals_;
  auto flow = ExecBody(root, frame, out);
  return flow.status();
}

absl::Status Interpreter::Step() {
  if (++steps_ > limits_.max_steps) {
    return Bad(absl::StrCat("the template ran more than ", limits_.max_steps, " steps"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Write(std::string* out, std::string_view text) {
  output_bytes_ += text.size();
  if (output_bytes_ > limits_.max_output_bytes) {
    return Bad(absl::StrCat("output longer than ", limits_.max_output_bytes, " bytes"));
  }
  out->append(text);
  return absl::OkStatus();
}

absl::Status Interpreter::Locate(absl::Status st, int line) {
  if (st.ok() || absl::StartsWith(st.message(), kLocatedPrefix)) return st;
  return absl::Status(st.code(), absl::StrCat(kLocatedPrefix, line, ": ", st.message()));
}

// ---- statements ----

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const Node& n,
                                                        const std::shared_ptr<Frame>& frame,
                                                        std::string* out) {
  for (const auto& s : n.a) {
    ODMOE_ASSIGN_OR_RETURN(Flow flow, Exec(*s, frame, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Node& n,
                                                    const std::shared_ptr<Frame>& frame,
                                                    std::string* out) {
  switch (n.kind) {
    case NodeKind::kBody:
      return ExecBody(n, frame, out);
    case NodeKind::kText:
      ODMOE_RETURN_IF_ERROR(Locate(Write(out, n.name), n.line));
      return Flow::kNormal;
    case NodeKind::kOutput: {
      ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*n.a[0], frame));
      ODMOE_RETURN_IF_ERROR(Locate(Write(out, v.Str()), n.line));
      return Flow::kNormal;
    }
    case NodeKind::kIf:
      for (size_t i = 0; i < n.b.size(); ++i) {
        if (i < n.a.size()) {
          ODMOE_ASSIGN_OR_RETURN(Value cond, Eval(*n.a[i], frame));
          if (!cond.Truthy()) continue;
        }
        return ExecBody(*n.b[i], frame, out);
      }
      return Flow::kNormal;
    case NodeKind::kFor:
      return ExecFor(n, frame, out);
    case NodeKind::kSet:
      ODMOE_RETURN_IF_ERROR(ExecSet(n, frame));
      return Flow::kNormal;
    case NodeKind::kSetBlock: {
      std::string text;
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      ODMOE_RETURN_IF_ERROR(ExecBody(*n.a[0], inner, &text).status());
      ODMOE_ASSIGN_OR_RETURN(Value v, FilterChain(n.b, Value::String(std::move(text)), frame));
      frame->Set(n.names[0], std::move(v));
      return Flow::kNormal;
    }
    case NodeKind::kFilterBlock: {
      std::string text;
      ODMOE_RETURN_IF_ERROR(ExecBody(*n.a[0], frame, &text).status());
      ODMOE_ASSIGN_OR_RETURN(Value v, FilterChain(n.b, Value::String(std::move(text)), frame));
      ODMOE_RETURN_IF_ERROR(Write(out, v.Str()));
      return Flow::kNormal;
    }
    case NodeKind::kMacro:
      frame->Set(n.name, MakeMacro(n, frame, Value()));
      return Flow::kNormal;
    case NodeKind::kCallBlock: {
      // caller() renders the block's body, with the block's parameters.
      Value caller = MakeMacro(n, frame, Value());
      const Node& call = *n.a[0];
      ODMOE_ASSIGN_OR_RETURN(Value callee, Eval(*call.a[0], frame));
      ODMOE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, frame));
      args.keyword.emplace_back("caller", caller);
      auto r = Call(callee, args);
      if (!r.ok()) return Locate(r.status(), n.line);
      ODMOE_RETURN_IF_ERROR(Write(out, r->Str()));
      return Flow::kNormal;
    }
    case NodeKind::kWith: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      for (size_t i = 0; i < n.names.size(); ++i) {
        ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*n.c[i], frame));
        inner->Set(n.names[i], std::move(v));
      }
      return ExecBody(*n.a[0], inner, out);
    }
    case NodeKind::kBreak:
      return Flow::kBreak;
    case NodeKind::kContinue:
      return Flow::kContinue;
    default:
      return Locate(Bad("not a statement"), n.line);
  }
}

absl::StatusOr<Value> Interpreter::FilterChain(const std::vector<std::unique_ptr<Node>>& filters,
                                               Value v, const std::shared_ptr<Frame>& frame) {
  for (const auto& f : filters) {
    ODMOE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(*f, frame));
    auto r = ApplyFilter(f->name, v, args);
    if (!r.ok()) return Locate(r.status(), f->line);
    v = std::move(*r);
  }
  return v;
}

absl::Status Interpreter::ExecSet(const Node& n, const std::shared_ptr<Frame>& frame) {
  ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*n.a[0], frame));
  if (v.depth() > kMaxValueDepth) {
    return Locate(Bad(absl::StrCat("values nested deeper than ", kMaxValueDepth)), n.line);
  }
  if (!n.attr.empty()) {
    const Value* ns = frame->Lookup(n.names[0]);
    if (ns == nullptr || !ns->is_dict() || !ns->AsDict().is_namespace) {
      return Locate(Bad("can only set attributes of a namespace()"), n.line);
    }
    ns->AsDict().Set(n.attr, std::move(v));
    assigned_namespaces_.push_back(ns->dict_ptr());
    return absl::OkStatus();
  }
  if (n.names.size() == 1) {
    frame->Set(n.names[0], std::move(v));
    return absl::OkStatus();
  }
  auto items = Iterate(v);
  if (!items.ok()) return Locate(items.status(), n.line);
  if (items->size() != n.names.size()) {
    return Locate(
        Bad(absl::StrCat("cannot unpack ", items->size(), " values into ", n.names.size())),
        n.line);
  }
  for (size_t i = 0; i < n.names.size(); ++i) frame->Set(n.names[i], (*items)[i]);
  return absl::OkStatus();
}

Value Interpreter::MakeMacro(const Node& n, const std::shared_ptr<Frame>& frame, const Value&) {
  const Node* node = &n;
  std::shared_ptr<Frame> closure = frame;
  captured_frames_.push_back(frame);
  bool is_caller = n.kind == NodeKind::kCallBlock;
  const Node* body = is_caller ? n.a[1].get() : n.a[0].get();
  return Value::Function(
      is_caller ? "caller" : n.name,
      [node, closure, body](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
        auto scope = std::make_shared<Frame>();
        scope->parent = closure;
        std::vector<bool> bound(node->names.size(), false);
        if (args.positional.size() > node->names.size()) {
          return Bad(absl::StrCat("macro '", node->name, "' takes not more than ",
                                  node->names.size(), " argument(s)"));
        }
        for (size_t i = 0; i < args.positional.size(); ++i) {
          scope->Set(node->names[i], args.positional[i]);
          bound[i] = true;
        }
        for (auto& [key, v] : args.keyword) {
          size_t i = 0;
          while (i < node->names.size() && node->names[i] != key) ++i;
          if (i == node->names.size()) {
            if (key == "caller") {
              scope->Set("caller", v);
              continue;
            }
            return Bad(
                absl::StrCat("macro '", node->name, "' takes no keyword argument '", key, "'"));
          }
          scope->Set(key, v);
          bound[i] = true;
        }
        for (size_t i = 0; i < node->names.size(); ++i) {
          if (bound[i]) continue;
          if (node->c[i]) {
            ODMOE_ASSIGN_OR_RETURN(Value d, in.Eval(*node->c[i], scope));
            scope->Set(node->names[i], std::move(d));
          } else {
            scope->Set(node->names[i],
                       Value::Undefined(absl::StrCat("'", node->names[i], "' is undefined")));
          }
        }
        std::string text;
        ODMOE_RETURN_IF_ERROR(in.ExecBody(*body, scope, &text).status());
        return Value::String(std::move(text));
      });
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecFor(const Node& n,
                                                       const std::shared_ptr<Frame>& frame,
                                                       std::string* out) {
  ODMOE_ASSIGN_OR_RETURN(Value iterable, Eval(*n.a[0], frame));
  ODMOE_RETURN_IF_ERROR(RunLoop(n, frame, iterable, 0, out).status());
  return Flow::kNormal;
}

absl::StatusOr<Value> Interpreter::RunLoop(const Node& n, const std::shared_ptr<Frame>& frame,
                                           const Value& iterable, int depth, std::string* out) {
  auto all = Iterate(iterable);
  if (!all.ok()) return Locate(all.status(), n.line);
  auto bind = [&n](Frame* f, const Value& item) -> absl::Status {
    if (n.names.size() == 1) {
      f->Set(n.names[0], item);
      return absl::OkStatus();
    }
    ODMOE_ASSIGN_OR_RETURN(ValueList parts, Iterate(item));
    if (parts.size() != n.names.size()) {
      return Bad(absl::StrCat("cannot unpack ", parts.size(), " values into ", n.names.size()));
    }
    for (size_t i = 0; i < parts.size(); ++i) f->Set(n.names[i], parts[i]);
    return absl::OkStatus();
  };
  // The loop filter (`for x in y if cond`) runs first: loop.length counts what passes.
  ValueList items;
  if (n.a[1]) {
    for (const Value& item : *all) {
      ODMOE_RETURN_IF_ERROR(Step());
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      ODMOE_RETURN_IF_ERROR(Locate(bind(scope.get(), item), n.line));
      ODMOE_ASSIGN_OR_RETURN(Value keep, Eval(*n.a[1], scope));
      if (keep.Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(*all);
  }
  std::string local;
  std::string* sink = out != nullptr ? out : &local;
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    ODMOE_RETURN_IF_ERROR(Locate(Step(), n.line));
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    ODMOE_RETURN_IF_ERROR(Locate(bind(scope.get(), items[i]), n.line));
    auto loop = std::make_shared<ValueDict>();
    loop->Set("index", Value::Int(i + 1));
    loop->Set("index0", Value::Int(i));
    loop->Set("revindex", Value::Int(length - i));
    loop->Set("revindex0", Value::Int(length - i - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i == length - 1));
    loop->Set("length", Value::Int(length));
    loop->Set("depth", Value::Int(depth + 1));
    loop->Set("depth0", Value::Int(depth));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->Set("nextitem",
              i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item"));
    loop->Set("cycle",
              Value::Function("cycle", [i](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
                if (args.positional.empty()) return Bad("no items for cycling given");
                return args.positional[i % args.positional.size()];
              }));
    if (n.negated) {
      const Node* node = &n;
      std::shared_ptr<Frame> outer = frame;
      captured_frames_.push_back(frame);
      loop->call = std::make_shared<Callable>(Callable{
          "loop", [node, outer, depth](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
            if (args.positional.size() != 1) return Bad("loop() takes one argument");
            if (++in.depth_ > in.limits_.max_call_depth) {
              --in.depth_;
              return Bad("recursion deeper than the limit");
            }
            std::string text;
            auto r = in.RunLoop(*node, outer, args.positional[0], depth + 1, &text);
            --in.depth_;
            if (!r.ok()) return r.status();
            return Value::String(std::move(text));
          }});
    }
    scope->Set("loop", Value::Dict(loop));
    ODMOE_ASSIGN_OR_RETURN(Flow flow, ExecBody(*n.a[2], scope, sink));
    if (flow == Flow::kBreak) break;
  }
  if (length == 0 && n.a[3]) ODMOE_RETURN_IF_ERROR(ExecBody(*n.a[3], frame, sink).status());
  return Value::String(local);
}

// ---- expressions ----

absl::StatusOr<Value> Interpreter::Eval(const Node& n, const std::shared_ptr<Frame>& frame) {
  auto r = EvalInner(n, frame);
  if (!r.ok()) return Locate(r.status(), n.line);
  return r;
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Node& n, const std::shared_ptr<Frame>& frame) {
  CallArgs args;
  for (const auto& p : n.b) {
    ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*p, frame));
    args.positional.push_back(std::move(v));
  }
  for (size_t i = 0; i < n.c.size(); ++i) {
    ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*n.c[i], frame));
    args.keyword.emplace_back(n.names[i], std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalInner(const Node& n, const std::shared_ptr<Frame>& frame) {
  switch (n.kind) {
    case NodeKind::kConst:
      return n.value;
    case NodeKind::kName: {
      const Value* v = frame->Lookup(n.name);
      if (v == nullptr) return Value::Undefined(absl::StrCat("'", n.name, "' is undefined"));
      return *v;
    }
    case NodeKind::kList:
    case NodeKind::kTuple: {
      ValueList items;
      for (const auto& e : n.a) {
        ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*e, frame));
        items.push_back(std::move(v));
      }
      Value list = Value::List(std::move(items), n.kind == NodeKind::kTuple);
      if (list.depth() > kMaxValueDepth)
        return Bad(absl::StrCat("values nested deeper than ", kMaxValueDepth));
      return list;
    }
    case NodeKind::kDict: {
      Value d = Value::NewDict();
      for (size_t i = 0; i < n.a.size(); ++i) {
        ODMOE_ASSIGN_OR_RETURN(Value k, Eval(*n.a[i], frame));
        ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*n.b[i], frame));
        if (k.is_dict() || k.is_undefined() || (k.is_list() && !k.is_tuple())) {
          return Bad(absl::StrCat("unhashable type: '", k.TypeName(), "'"));
        }
        d.AsDict().SetKey(std::move(k), std::move(v));
      }
      d = Value::Dict(d.dict_ptr());  // its depth, now that it is filled
      if (d.depth() > kMaxValueDepth)
        return Bad(absl::StrCat("values nested deeper than ", kMaxValueDepth));
      return d;
    }
    case NodeKind::kGetAttr: {
      ODMOE_ASSIGN_OR_RETURN(Value obj, Eval(*n.a[0], frame));
      return GetAttr(obj, n.name);
    }
    case NodeKind::kGetItem: {
      ODMOE_ASSIGN_OR_RETURN(Value obj, Eval(*n.a[0], frame));
      if (n.a[1]->kind == NodeKind::kSlice) return EvalSlice(obj, *n.a[1], frame);
      ODMOE_ASSIGN_OR_RETURN(Value key, Eval(*n.a[1], frame));
      return GetItem(obj, key);
    }
    case NodeKind::kCall: {
      ODMOE_ASSIGN_OR_RETURN(Value callee, Eval(*n.a[0], frame));
      ODMOE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(n, frame));
      return Call(callee, args);
    }
    case NodeKind::kFilter: {
      ODMOE_ASSIGN_OR_RETURN(Value input, Eval(*n.a[0], frame));
      ODMOE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(n, frame));
      return ApplyFilter(n.name, input, args);
    }
    case NodeKind::kTest: {
      ODMOE_ASSIGN_OR_RETURN(Value input, Eval(*n.a[0], frame));
      ODMOE_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(n, frame));
      ODMOE_ASSIGN_OR_RETURN(bool r, ApplyTest(n.name, input, args));
      return Value::Bool(r != n.negated);
    }
    case NodeKind::kUnary: {
      ODMOE_ASSIGN_OR_RETURN(Value x, Eval(*n.a[0], frame));
      if (n.name == "not") return Value::Bool(!x.Truthy());
      if (x.is_undefined()) return UndefinedError(x);
      if (!x.is_number())
        return Bad(absl::StrCat("bad operand type for unary ", n.name, ": '", x.TypeName(), "'"));
      if (n.name == "+") return x.is_bool() ? Value::Int(x.AsInt()) : x;
      if (x.is_float()) return Value::Float(-x.AsFloat());
      return Value::Int(-x.AsInt());
    }
    case NodeKind::kBinary: {
      ODMOE_ASSIGN_OR_RETURN(Value a, Eval(*n.a[0], frame));
      if (n.name == "and") {
        if (!a.Truthy()) return a;
        return Eval(*n.a[1], frame);
      }
      if (n.name == "or") {
        if (a.Truthy()) return a;
        return Eval(*n.a[1], frame);
      }
      ODMOE_ASSIGN_OR_RETURN(Value b, Eval(*n.a[1], frame));
      if (n.name == "~") return Value::String(a.Str() + b.Str());
      return ArithmeticImpl(n.name, a, b);
    }
    case NodeKind::kCompare: {
      ODMOE_ASSIGN_OR_RETURN(Value left, Eval(*n.a[0], frame));
      for (size_t i = 0; i < n.b.size(); ++i) {
        ODMOE_ASSIGN_OR_RETURN(Value right, Eval(*n.b[i], frame));
        const std::string& op = n.names[i];
        bool r = false;
        if (op == "==") {
          r = Equal(left, right);
        } else if (op == "!=") {
          r = !Equal(left, right);
        } else if (op == "in" || op == "notin") {
          ODMOE_ASSIGN_OR_RETURN(r, Contains(right, left));
          if (op == "notin") r = !r;
        } else if (op == "<") {
          ODMOE_ASSIGN_OR_RETURN(r, Less(left, right));
        } else if (op == ">") {
          ODMOE_ASSIGN_OR_RETURN(r, Less(right, left));
        } else if (op == "<=") {
          ODMOE_ASSIGN_OR_RETURN(bool gt, Less(right, left));
          r = !gt;
        } else if (op == ">=") {
          ODMOE_ASSIGN_OR_RETURN(bool lt, Less(left, right));
          r = !lt;
        }
        if (!r) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case NodeKind::kCondExpr: {
      ODMOE_ASSIGN_OR_RETURN(Value cond, Eval(*n.a[1], frame));
      if (cond.Truthy()) return Eval(*n.a[0], frame);
      if (n.a[2]) return Eval(*n.a[2], frame);
      return Value::Undefined(
          "the inline if-expression evaluated to false and no else section was defined");
    }
    default:
      return Bad("not an expression");
  }
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Value& obj, const Node& slice,
                                             const std::shared_ptr<Frame>& frame) {
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!slice.a[k]) continue;
    ODMOE_ASSIGN_OR_RETURN(Value v, Eval(*slice.a[k], frame));
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool()) return Bad("slice indices must be integers or None");
    bounds[k] = v.AsInt();
  }
  if ((!obj.is_string() && !obj.is_list()) || obj.is_generator()) {
    if (obj.is_undefined()) return UndefinedError(obj);
    return Bad(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  }
  std::vector<std::string> chars;
  if (obj.is_string()) chars = CodePoints(obj.AsString());
  int64_t len = obj.is_string() ? chars.size() : obj.AsList().size();
  int64_t step = bounds[2].value_or(1);
  if (step == 0) return Bad("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> b, int64_t def) {
    if (!b) return def;
    int64_t x = *b < 0 ? *b + len : *b;
    if (step > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  int64_t start = clamp(bounds[0], step > 0 ? 0 : len - 1);
  int64_t stop = clamp(bounds[1], step > 0 ? len : -1);
  std::string s;
  ValueList items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_string()) {
      s += chars[i];
    } else {
      items.push_back(obj.AsList()[i]);
    }
  }
  if (obj.is_string()) return Value::String(std::move(s));
  return Value::List(std::move(items), obj.is_tuple());
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  const Callable* fn = nullptr;
  if (callee.is_callable()) {
    fn = &callee.AsCallable();
  } else if (callee.is_dict() && callee.AsDict().call) {
    fn = callee.AsDict().call.get();
  } else if (callee.is_undefined()) {
    const std::string& hint = callee.undefined_hint();
    if (absl::StartsWith(hint, "access to attribute")) return Bad(hint);
    return Bad(hint.empty() ? "undefined value is not callable" : hint);
  } else {
    return Bad(absl::StrCat("'", callee.TypeName(), "' object is not callable"));
  }
  ODMOE_RETURN_IF_ERROR(Step());
  if (++depth_ > limits_.max_call_depth) {
    --depth_;
    return Bad(absl::StrCat("calls nested deeper than ", limits_.max_call_depth));
  }
  auto r = fn->call(*this, args);
  --depth_;
  return r;
}

absl::StatusOr<Value> Interpreter::ApplyFilter(const std::string& name, const Value& input,
                                               CallArgs& args) {
  return Filter(*this, name, input, args);
}

absl::StatusOr<bool> Interpreter::ApplyTest(const std::string& name, const Value& input,
                                            CallArgs& args) {
  return Test(*this, name, input, args);
}

absl::StatusOr<Value> Interpreter::GetAttr(const Value& obj, const std::string& name) {
  if (std::optional<Value> m = Method(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = obj.AsDict().Find(name)) return *v;
    return Value::Undefined(absl::StrCat("'",
                                         obj.AsDict().is_namespace ? "Namespace" : "dict object",
                                         "' has no attribute '", name, "'"));
  }
  if (obj.is_undefined()) return UndefinedError(obj);
  return Value::Undefined(
      absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.AsDict().FindKey(key)) return *v;
  }
  if (obj.is_generator()) return Bad("'generator' object is not subscriptable");
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    std::vector<std::string> chars;
    if (obj.is_string()) chars = CodePoints(obj.AsString());
    int64_t len = obj.is_list() ? obj.AsList().size() : chars.size();
    int64_t i = key.AsInt() < 0 ? key.AsInt() + len : key.AsInt();
    if (i >= 0 && i < len) return obj.is_list() ? obj.AsList()[i] : Value::String(chars[i]);
    return Value::Undefined(
        absl::StrCat("'", obj.TypeName(), " object' has no element ", key.AsInt()));
  }
  if (key.is_string()) {
    if (std::optional<Value> m = Method(obj, key.AsString())) return *m;
  }
  return Value::Undefined(absl::StrCat("'", obj.is_dict() ? "dict" : obj.TypeName(),
                                       " object' has no attribute ", key.Repr()));
}

}  // namespace odmoe::jinja
