#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace odmoe::jinja {

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::Markup(std::string s) {
  Value v = String(std::move(s));
  v.tuple_ = true;  // on a string: Markup
  return v;
}
Value Value::List(ValueList items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_ + 1);
  if (items.empty()) v.depth_ = 1;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::Generator(ValueList items) {
  Value v = List(std::move(items));
  v.generator_ = true;
  return v;
}
Value Value::Dict(std::shared_ptr<ValueDict> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.depth_ = 1;
  for (const auto& [k, x] : dict->items) v.depth_ = std::max(v.depth_, x.depth_ + 1);
  v.dict_ = std::move(dict);
  return v;
}
Value Value::NewDict() { return Dict(std::make_shared<ValueDict>()); }
Value Value::Function(std::string name,
                      std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

namespace {

template <typename Json>
Value FromJsonImpl(const Json& j) {
  switch (j.type()) {
    case nlohmann::detail::value_t::null:
      return Value::None();
    case nlohmann::detail::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case nlohmann::detail::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value::Float(static_cast<double>(u))
                                                  : Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::detail::value_t::number_float:
      return Value::Float(j.template get<double>());
    case nlohmann::detail::value_t::string:
      return Value::String(j.template get<std::string>());
    case nlohmann::detail::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e));
      return Value::List(std::move(items));
    }
    case nlohmann::detail::value_t::object: {
      auto d = std::make_shared<ValueDict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->Set(it.key(), FromJsonImpl(it.value()));
      return Value::Dict(std::move(d));
    }
    default:
      return Value::None();
  }
}

}  // namespace

Value Value::FromJson(const nlohmann::ordered_json& j) { return FromJsonImpl(j); }
Value Value::FromJson(const nlohmann::json& j) { return FromJsonImpl(j); }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
      return generator_ || !list_->empty();
    case Kind::kDict:
      return dict_->is_namespace || !dict_->items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  // buf = d.ddde[+-]XX: the digits and the decimal exponent.
  std::string s = buf;
  bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  size_t e = s.find('e');
  int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exponent + 1) {
    out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
  }
  return negative ? "-" + out : out;
}

namespace {

std::string StringRepr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    default:
      return Repr();
  }
}

std::string Value::Repr(int level) const {
  if (level > 200 && (kind_ == Kind::kList || kind_ == Kind::kDict)) return "...";
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return FloatRepr(f_);
    case Kind::kString:
      return StringRepr(s_);
    case Kind::kList: {
      if (generator_) return "<generator object>";
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr(level + 1);
      }
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = dict_->is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr(level + 1) + ": " + v.Repr(level + 1);
      }
      return out + (dict_->is_namespace ? "}>" : "}");
    }
    case Kind::kCallable:
      return "<function " + fn_->name + ">";
  }
  return "";
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return generator_ ? "generator" : tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.AsString() == key) return &v;
  }
  return nullptr;
}

const Value* ValueDict::FindKey(const Value& key) const {
  if (key.is_string()) return Find(key.AsString());
  for (const auto& [k, v] : items) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

void ValueDict::Set(const std::string& key, Value v) { SetKey(Value::String(key), std::move(v)); }

void ValueDict::SetKey(Value key, Value v) {
  for (auto& [k, old] : items) {
    if (Equal(k, key)) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

bool Equal(const Value& a, const Value& b, int level) {
  if (level > 200) return false;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsFloat() == b.AsFloat();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.AsString() == b.AsString();
    case Value::Kind::kList: {
      if (a.is_generator() || b.is_generator()) return false;
      if (a.is_tuple() != b.is_tuple() || a.AsList().size() != b.AsList().size()) return false;
      for (size_t i = 0; i < a.AsList().size(); ++i) {
        if (!Equal(a.AsList()[i], b.AsList()[i], level + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.AsDict().items;
      const auto& y = b.AsDict();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* o = y.FindKey(k);
        if (o == nullptr || !Equal(v, *o, level + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.AsCallable() == &b.AsCallable();
    default:
      return false;
  }
}

namespace {

void AppendCodePointEscape(uint32_t cp, std::string* out) {
  char buf[16];
  if (cp >= 0x10000) {
    cp -= 0x10000;
    std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
  }
  *out += buf;
}

void JsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    switch (c) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      AppendCodePointEscape(c, out);
    } else if (c >= 0x80 && ensure_ascii) {
      // Decode one UTF-8 sequence (invalid bytes escape as themselves).
      int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0F : len == 2 ? c & 0x1F : c;
      if (i + len > s.size()) len = 1, cp = c;
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      AppendCodePointEscape(cp, out);
      i += len - 1;
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += '"';
}

absl::Status JsonValue(const Value& v, const JsonOptions& o, int level, std::string* out) {
  if (level > 256) return absl::InvalidArgumentError("tojson: nesting deeper than 256");
  const std::string item_sep = o.separators ? o.separators->first : (o.indent ? "," : ", ");
  const std::string key_sep = o.separators ? o.separators->second : ": ";
  auto newline = [&](int depth) {
    if (!o.indent) return;
    *out += '\n';
    for (int i = 0; i < depth; ++i) *out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.AsBool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      *out += std::to_string(v.AsInt());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      double f = v.AsFloat();
      *out += std::isnan(f)   ? "NaN"
              : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity")
                              : FloatRepr(f);
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      JsonString(v.AsString(), o.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.is_generator()) {
        return absl::InvalidArgumentError(
            "tojson: Object of type generator is not JSON serializable");
      }
      if (v.AsList().empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      *out += '[';
      for (size_t i = 0; i < v.AsList().size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        absl::Status st = JsonValue(v.AsList()[i], o, level + 1, out);
        if (!st.ok()) return st;
      }
      newline(level);
      *out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.AsDict().is_namespace) {
        return absl::InvalidArgumentError(
            "tojson: Object of type Namespace is not JSON serializable");
      }
      auto items = v.AsDict().items;
      if (items.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      // json.dumps writes keys as strings: str as is, numbers, true/false/null.
      std::vector<std::pair<std::string, Value>> keyed;
      for (auto& [k, x] : items) {
        std::string key;
        if (k.is_string()) {
          key = k.AsString();
        } else if (k.is_bool()) {
          key = k.AsBool() ? "true" : "false";
        } else if (k.is_none()) {
          key = "null";
        } else if (k.is_int() || k.is_float()) {
          key = k.Repr();
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              "tojson: keys must be str, int, float, bool or None, not ", k.TypeName()));
        }
        keyed.emplace_back(std::move(key), x);
      }
      if (o.sort_keys) {
        std::stable_sort(keyed.begin(), keyed.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      *out += '{';
      for (size_t i = 0; i < keyed.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        JsonString(keyed[i].first, o.ensure_ascii, out);
        *out += key_sep;
        absl::Status st = JsonValue(keyed[i].second, o, level + 1, out);
        if (!st.ok()) return st;
      }
      newline(level);
      *out += '}';
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tojson: Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  absl::Status st = JsonValue(v, options, 0, &out);
  if (!st.ok()) return st;
  return out;
}

}  // namespace odmoe::jinja
