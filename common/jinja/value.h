// The values a Jinja template computes with, shaped as Python's (jinja2 runs
// on Python objects, and a template's output is their str()):
//
//   kind        Python               str()                 truth
//   undefined   jinja2.Undefined     ""                    false
//   none        None                 "None"                false
//   bool        bool                 "True" / "False"
//   int         int (64-bit here)    "12"                  != 0
//   float       float                repr: "0.5", "1e+16"  != 0
//   string      str (UTF-8 bytes)    itself                non-empty
//   list        list / tuple         "['a', 1]" / "(1,)"   non-empty
//   dict        dict (insertion      "{'a': 1}"            non-empty
//               order) / namespace
//   callable    a macro, a method,   "<function>"          true
//               a global function
//
// Lists and dicts are shared (reference semantics, as in Python): a
// namespace() assigned through `set ns.x = ...` is seen by every holder.
// The sandbox forbids mutating lists and dicts (ImmutableSandboxedEnvironment),
// so only namespaces change after they are built.
//
//   Value v = Value::FromJson(nlohmann::ordered_json::parse(R"({"a": [1, 2.5, "x"]})"));
//   std::string s = v.Str();                   // {'a': [1, 2.5, 'x']}
//   std::string j = ToJson(v, {}).value();     // {"a": [1, 2.5, "x"]}
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace odmoe::jinja {

class Value;
class Interpreter;

/// A call's arguments: positional, then keyword (in the order written).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

/// A function a template can call (macro, bound method, global, loop.cycle).
struct Callable {
  std::string name;
  std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)> call;
};

using ValueList = std::vector<Value>;
struct ValueDict;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  /// A markupsafe.Markup string (the `safe` and `escape` filters): `+` with a
  /// plain string HTML-escapes the plain one, as Python's Markup does.
  static Value Markup(std::string s);
  static Value List(ValueList items, bool tuple = false);
  /// What jinja2's map/select/unique/... return: a Python generator, which
  /// iterates but has no len(), no index and no JSON form, and is always true.
  static Value Generator(ValueList items);
  static Value Dict(std::shared_ptr<ValueDict> dict);
  static Value NewDict();
  static Value Function(std::string name,
                        std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)> call);
  /// JSON -> Value; objects keep their order (use nlohmann::ordered_json:
  /// nlohmann::json sorts keys, which tojson would then print sorted).
  static Value FromJson(const nlohmann::ordered_json& j);
  static Value FromJson(const nlohmann::json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && tuple_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_generator() const { return kind_ == Kind::kList && generator_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool AsBool() const { return b_; }
  int64_t AsInt() const { return is_bool() ? (b_ ? 1 : 0) : i_; }
  double AsFloat() const { return is_float() ? f_ : static_cast<double>(AsInt()); }
  const std::string& AsString() const { return s_; }
  /// Why this value is undefined ("'foo' is undefined"), for errors.
  const std::string& undefined_hint() const { return s_; }
  const ValueList& AsList() const { return *list_; }
  ValueDict& AsDict() const { return *dict_; }
  const std::shared_ptr<ValueDict>& dict_ptr() const { return dict_; }
  const Callable& AsCallable() const { return *fn_; }

  /// Python truth.
  bool Truthy() const;
  /// Python str() (undefined: "").
  std::string Str() const;
  /// Python repr() (how a list prints its items). Past 200 levels (a
  /// namespace that holds itself) "..." stands for the rest, as Python's
  /// "[...]" does for a cycle.
  std::string Repr(int level = 0) const;
  /// How deeply lists and dicts nest in this value, as built (0: a scalar;
  /// a dict changed later keeps its first depth).
  int depth() const { return depth_; }
  /// The Python type name in errors: "str", "int", "dict", ...
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  bool generator_ = false;
  int depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Callable> fn_;
};

/// A dict with Python's insertion order. Keys are values (strings from JSON;
/// a template's literal may use numbers); a namespace() is a dict marked as
/// one, the only value `set ns.attr = ...` may change.
struct ValueDict {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;
  /// loop objects: what `loop(...)` calls (recursive loops).
  std::shared_ptr<Callable> call;

  const Value* Find(std::string_view key) const;  // a string key
  const Value* FindKey(const Value& key) const;   // any key, Python's ==
  void Set(const std::string& key, Value v);
  void SetKey(Value key, Value v);
};

/// Python ==, across int / float / bool and deep into lists and dicts
/// (false past 200 levels: a cycle).
bool Equal(const Value& a, const Value& b, int level = 0);

/// The deepest nesting a template may build (interpreter) or receive (context).
inline constexpr int kMaxValueDepth = 128;

/// transformers' tojson: json.dumps(x, ensure_ascii, indent, separators, sort_keys).
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None, or the indent string (an int n = n spaces)
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool sort_keys = false;
};
/// INVALID_ARGUMENT for values JSON cannot hold (undefined, callables).
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);

/// Python's repr of a float: shortest round trip, "1.0", "1e+16", "inf", "nan".
std::string FloatRepr(double f);

}  // namespace odmoe::jinja
