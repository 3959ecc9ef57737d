// Runs a parsed template (syntax.h) over Values (value.h), as jinja2's
// ImmutableSandboxedEnvironment would: scopes (a for loop's body and a macro
// get their own; `if` does not), the loop object, macros and call blocks,
// attribute and item lookup with jinja2's fallbacks, the filters, tests and
// methods of builtins.cpp. Every error is INVALID_ARGUMENT "line N: ..."
// (the innermost node's line). Bounded: output bytes, call depth and steps
// (loop iterations plus calls) stop a template that would run away.
//
//   Interpreter in(limits);
//   in.globals()->Set("messages", Value::FromJson(messages));
//   std::string out;
//   ODMOE_RETURN_IF_ERROR(in.Run(*root, &out));
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "jinja/syntax.h"
#include "jinja/value.h"

namespace odmoe::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;
  int max_call_depth = 64;         // nested macro calls, recursive loops, filters calling back
  int64_t max_steps = 10'000'000;  // loop iterations + calls over the whole render
};

/// A scope: its variables, then its parent's.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;

  const Value* Lookup(const std::string& name) const;
  void Set(const std::string& name, Value v) { vars[name] = std::move(v); }
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits);
  /// Breaks the reference cycles a render made (a macro's scope holds the
  /// macro, a namespace may hold itself), so that nothing outlives it.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// The render's outermost scope (the context and the globals).
  const std::shared_ptr<Frame>& globals() { return globals_; }

  absl::Status Run(const Node& root, std::string* out);

  // Used by the builtins.
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args);
  absl::StatusOr<Value> ApplyFilter(const std::string& name, const Value& input, CallArgs& args);
  absl::StatusOr<bool> ApplyTest(const std::string& name, const Value& input, CallArgs& args);
  /// jinja2's getattr (obj.name): an attribute (a method), else an item.
  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
  /// jinja2's getitem (obj[key]): an item, else an attribute.
  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
  /// Counts a step against the limit.
  absl::Status Step();

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  absl::StatusOr<Flow> Exec(const Node& n, const std::shared_ptr<Frame>& frame, std::string* out);
  absl::StatusOr<Flow> ExecBody(const Node& n, const std::shared_ptr<Frame>& frame,
                                std::string* out);
  absl::StatusOr<Flow> ExecFor(const Node& n, const std::shared_ptr<Frame>& frame,
                               std::string* out);
  absl::StatusOr<Value> RunLoop(const Node& n, const std::shared_ptr<Frame>& frame,
                                const Value& iterable, int depth, std::string* out);
  absl::Status ExecSet(const Node& n, const std::shared_ptr<Frame>& frame);
  /// A block's text through `filters` (filter and block-set blocks).
  absl::StatusOr<Value> FilterChain(const std::vector<std::unique_ptr<Node>>& filters, Value v,
                                    const std::shared_ptr<Frame>& frame);
  Value MakeMacro(const Node& n, const std::shared_ptr<Frame>& frame, const Value& caller);
  absl::StatusOr<Value> Eval(const Node& n, const std::shared_ptr<Frame>& frame);
  absl::StatusOr<Value> EvalInner(const Node& n, const std::shared_ptr<Frame>& frame);
  absl::StatusOr<CallArgs> EvalArgs(const Node& n, const std::shared_ptr<Frame>& frame);
  absl::StatusOr<Value> EvalSlice(const Value& obj, const Node& slice,
                                  const std::shared_ptr<Frame>& frame);
  absl::Status Write(std::string* out, std::string_view text);
  absl::Status Locate(absl::Status st, int line);

  RenderLimits limits_;
  std::shared_ptr<Frame> globals_;
  int depth_ = 0;
  int64_t steps_ = 0;
  size_t output_bytes_ = 0;
  // What may sit in a cycle: scopes a macro or a recursive loop captured,
  // namespaces assigned to. Cleared by the destructor.
  std::vector<std::weak_ptr<Frame>> captured_frames_;
  std::vector<std::weak_ptr<ValueDict>> assigned_namespaces_;
};

/// Marks an error message as already carrying its line.
inline constexpr char kLocatedPrefix[] = "line ";

// builtins.cpp
absl::StatusOr<Value> Filter(Interpreter& in, const std::string& name, const Value& input,
                             CallArgs& args);
absl::StatusOr<bool> Test(Interpreter& in, const std::string& name, const Value& input,
                          CallArgs& args);
/// A method of a str, dict or list value ("strip", "items", ...), or nullopt.
std::optional<Value> Method(const Value& obj, const std::string& name);
/// range, namespace, dict, raise_exception, strftime_now (with `now` formatting).
void AddGlobals(Frame* globals, std::function<std::string(const std::string&)> strftime_now);
/// Python's `<` (INVALID_ARGUMENT for types that do not compare).
absl::StatusOr<bool> Less(const Value& a, const Value& b);
/// Python's "%" formatting of a str (%s %r %d %i %f %%); args a tuple or one value.
absl::StatusOr<Value> PercentFormat(const std::string& fmt, const Value& args);
/// markupsafe.escape's text: & < > " ' as entities.
std::string HtmlEscape(const std::string& s);
/// Python's `in`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
/// A UTF-8 string's code points (Python indexes, slices and counts these).
std::vector<std::string> CodePoints(const std::string& s);
/// Iterating a value as Python does (a dict: its keys; a str: its characters).
absl::StatusOr<ValueList> Iterate(const Value& v);

}  // namespace odmoe::jinja
