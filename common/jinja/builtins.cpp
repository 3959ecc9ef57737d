// The filters, tests, methods and globals templates call, each as jinja2
// (3.1) and Python define them, with transformers' tojson.
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "jinja/interpreter.h"
#include "util/status_macros.h"

namespace odmoe::jinja {
namespace {

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

// Binds a call's arguments to parameter names, Python's way: positional
// first, then keywords; an unknown keyword or one too many is an error.
// `rest` (nullable) receives positionals past the named ones (*args).
absl::StatusOr<std::vector<Value>> Bind(const std::string& fn, CallArgs& args,
                                        std::initializer_list<const char*> params,
                                        ValueList* rest = nullptr) {
  std::vector<Value> out(params.size());
  size_t n = params.size();
  if (args.positional.size() > n && rest == nullptr) {
    return Bad(absl::StrCat(fn, "() takes at most ", n, " argument(s) (", args.positional.size(),
                            " given)"));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      out[i] = args.positional[i];
    } else if (rest != nullptr) {
      rest->push_back(args.positional[i]);
    }
  }
  for (auto& [key, v] : args.keyword) {
    size_t i = 0;
    for (const char* p : params) {
      if (key == p) break;
      ++i;
    }
    if (i == n) return Bad(absl::StrCat(fn, "() got an unexpected keyword argument '", key, "'"));
    out[i] = v;
  }
  return out;
}

bool Given(const Value& v) { return !v.is_undefined(); }

absl::StatusOr<std::string> NeedString(const std::string& fn, const Value& v) {
  if (!v.is_string()) return Bad(absl::StrCat(fn, ": expected a string, got ", v.TypeName()));
  return v.AsString();
}

bool IsPySpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    return chars.is_string() ? chars.AsString().find(c) != std::string::npos : IsPySpace(c);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_char(s[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(s[e - 1])) --e;
  }
  return s.substr(b, e - b);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string Capitalize(const std::string& s) {
  std::string out = Lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}
// Python's str.title(): a letter after a non-letter is upper case, others lower.
std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_letter = false;
  for (char c : s) {
    bool letter = std::isalpha(static_cast<unsigned char>(c));
    out += letter ? static_cast<char>(prev_letter ? std::tolower(c) : std::toupper(c)) : c;
    prev_letter = letter;
  }
  return out;
}
// jinja2's title filter: each word (split before -, whitespace, ( { [ <) capitalized.
std::string JinjaTitle(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    bool sep = c == '-' || IsPySpace(c) || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      out += c;
      word_start = true;
    } else {
      out += static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                          : std::tolower(static_cast<unsigned char>(c)));
      word_start = false;
    }
  }
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    std::vector<std::string> chars = CodePoints(s);
    for (const std::string& c : chars) {
      if (count < 0 || done < count) out += to, ++done;
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + to;
    pos = at + from.size();
    ++done;
  }
  return out + s.substr(pos);
}

// Python's str.split / rsplit.
ValueList Split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!sep.is_string()) {
    // Runs of whitespace separate; leading and trailing whitespace is dropped.
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && IsPySpace(s[i])) ++i;
      if (i == s.size()) break;
      size_t b = i;
      while (i < s.size() && !IsPySpace(s[i])) ++i;
      words.emplace_back(b, i);
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      if (!from_right) {
        for (int64_t k = 0; k < maxsplit; ++k)
          parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
        parts.push_back(s.substr(words[maxsplit].first));
      } else {
        size_t first = words.size() - maxsplit;
        parts.push_back(s.substr(0, words[first - 1].second));
        for (size_t k = first; k < words.size(); ++k)
          parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      }
    } else {
      for (auto [b, e] : words) parts.push_back(s.substr(b, e - b));
    }
  } else {
    const std::string& d = sep.AsString();
    if (!from_right) {
      size_t pos = 0;
      int64_t done = 0;
      while (maxsplit < 0 || done < maxsplit) {
        size_t at = s.find(d, pos);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(pos, at - pos));
        pos = at + d.size();
        ++done;
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      int64_t done = 0;
      std::vector<std::string> rev;
      while (maxsplit < 0 || done < maxsplit) {
        if (end < d.size()) break;
        size_t at = s.rfind(d, end - d.size());
        if (at == std::string::npos) break;
        rev.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
        ++done;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  ValueList out;
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return out;
}

std::vector<std::string> SplitLines(const std::string& x) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == '\n' || x[i] == '\r') {
      out.push_back(x.substr(b, i - b));
      if (x[i] == '\r' && i + 1 < x.size() && x[i + 1] == '\n') ++i;
      b = i + 1;
    }
  }
  if (b < x.size()) out.push_back(x.substr(b));
  return out;
}

int64_t Length(const Value& v) {
  if (v.is_string()) return CodePoints(v.AsString()).size();
  if (v.is_list()) return v.AsList().size();
  if (v.is_dict()) return v.AsDict().items.size();
  return 0;
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined(
      absl::StrCat("access to attribute '", name, "' of '", obj.TypeName(), "' object is unsafe."));
}

Value ItemsOf(const Value& dict) {
  ValueList items;
  for (const auto& [k, v] : dict.AsDict().items) items.push_back(Value::List({k, v}, true));
  return Value::List(std::move(items));
}

// str.format with {} / {0} / {name} fields (no format specs).
absl::StatusOr<Value> StrFormat(const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{', ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}', ++i;
    } else if (c == '{') {
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) return Bad("format: single '{' encountered");
      std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        return Bad("format: field options are not supported");
      const Value* v = nullptr;
      if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
        size_t idx = field.empty() ? auto_index++ : std::stoul(field);
        if (idx >= args.positional.size()) return Bad("format: index out of range");
        v = &args.positional[idx];
      } else {
        for (auto& [k, kv] : args.keyword) {
          if (k == field) v = &kv;
        }
        if (v == nullptr) return Bad(absl::StrCat("format: no argument '", field, "'"));
      }
      out += v->Str();
      i = close;
    } else {
      out += c;
    }
  }
  return Value::String(out);
}

using MethodFn = std::function<absl::StatusOr<Value>(const Value& self, CallArgs& args)>;

Value Bound(const Value& self, const std::string& name, MethodFn fn) {
  return Value::Function(name, [self, fn](Interpreter&, CallArgs& args) { return fn(self, args); });
}

std::optional<Value> StringMethod(const Value& self, const std::string& name) {
  const std::string& s = self.AsString();
  auto strip = [name](bool l, bool r) {
    return [name, l, r](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
      ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"chars"}));
      return Value::String(Strip(self.AsString(), p[0], l, r));
    };
  };
  if (name == "strip") return Bound(self, name, strip(true, true));
  if (name == "lstrip") return Bound(self, name, strip(true, false));
  if (name == "rstrip") return Bound(self, name, strip(false, true));
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return Bound(
        self, name, [name, right](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
          ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"sep", "maxsplit"}));
          if (p[0].is_string() && p[0].AsString().empty()) return Bad("empty separator");
          return Value::List(Split(self.AsString(), p[0], Given(p[1]) ? p[1].AsInt() : -1, right));
        });
  }
  if (name == "startswith" || name == "endswith") {
    bool start = name == "startswith";
    return Bound(
        self, name, [name, start](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
          ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"prefix"}));
          ValueList options = p[0].is_tuple() ? p[0].AsList() : ValueList{p[0]};
          for (const Value& o : options) {
            ODMOE_ASSIGN_OR_RETURN(std::string x, NeedString(name, o));
            if (start ? absl::StartsWith(self.AsString(), x) : absl::EndsWith(self.AsString(), x)) {
              return Value::Bool(true);
            }
          }
          return Value::Bool(false);
        });
  }
  if (name == "replace") {
    return Bound(self, name, [](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
      ODMOE_ASSIGN_OR_RETURN(auto p, Bind("replace", args, {"old", "new", "count"}));
      ODMOE_ASSIGN_OR_RETURN(std::string from, NeedString("replace", p[0]));
      ODMOE_ASSIGN_OR_RETURN(std::string to, NeedString("replace", p[1]));
      return Value::String(Replace(self.AsString(), from, to, Given(p[2]) ? p[2].AsInt() : -1));
    });
  }
  static const std::map<std::string, std::string (*)(const std::string&)> kCase = {
      {"upper", [](const std::string& x) { return Upper(x); }},
      {"lower", [](const std::string& x) { return Lower(x); }},
      {"title", PyTitle},
      {"capitalize", Capitalize},
  };
  if (auto it = kCase.find(name); it != kCase.end()) {
    auto fn = it->second;
    return Bound(self, name,
                 [fn, name](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
                   ODMOE_RETURN_IF_ERROR(Bind(name, args, {}).status());
                   return Value::String(fn(self.AsString()));
                 });
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    return Bound(self, name, [name](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
      ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"sub"}));
      ODMOE_ASSIGN_OR_RETURN(std::string sub, NeedString(name, p[0]));
      const std::string& s = self.AsString();
      if (name == "count") {
        if (sub.empty()) return Value::Int(CodePoints(s).size() + 1);
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
          ++n;
        return Value::Int(n);
      }
      size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (at == std::string::npos) {
        if (name == "index") return Bad("substring not found");
        return Value::Int(-1);
      }
      return Value::Int(CodePoints(s.substr(0, at)).size());
    });
  }
  if (name == "format") {
    return Bound(self, name, [](const Value& self, CallArgs& args) {
      return StrFormat(self.AsString(), args);
    });
  }
  if (name == "join") {
    return Bound(self, name, [](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
      ODMOE_ASSIGN_OR_RETURN(auto p, Bind("join", args, {"iterable"}));
      ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(p[0]));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) return Bad("join: sequence item is not a str");
        if (i) out += self.AsString();
        out += items[i].AsString();
      }
      return Value::String(out);
    });
  }
  static const std::map<std::string, int (*)(int)> kClass = {
      {"isdigit", ::isdigit}, {"isalpha", ::isalpha}, {"isalnum", ::isalnum},
      {"isspace", ::isspace}, {"isupper", ::isupper}, {"islower", ::islower}};
  if (auto it = kClass.find(name); it != kClass.end()) {
    auto fn = it->second;
    return Bound(self, name, [fn](const Value& self, CallArgs&) -> absl::StatusOr<Value> {
      const std::string& x = self.AsString();
      bool ok = !x.empty() && std::all_of(x.begin(), x.end(), [fn](char c) {
        return fn(static_cast<unsigned char>(c));
      });
      return Value::Bool(ok);
    });
  }
  if (name == "splitlines") {
    return Bound(self, name, [](const Value& self, CallArgs&) -> absl::StatusOr<Value> {
      ValueList out;
      for (auto& line : SplitLines(self.AsString())) out.push_back(Value::String(std::move(line)));
      return Value::List(std::move(out));
    });
  }
  (void)s;
  return std::nullopt;
}

absl::StatusOr<Value> ToJsonFilter(const Value& input, CallArgs& args) {
  ODMOE_ASSIGN_OR_RETURN(
      auto p, Bind("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = p[0].Truthy();
  if (Given(p[1]) && !p[1].is_none()) {
    if (p[1].is_string()) {
      o.indent = p[1].AsString();
    } else if (p[1].is_int()) {
      o.indent = std::string(std::max<int64_t>(0, std::min<int64_t>(p[1].AsInt(), 64)), ' ');
    } else {
      return Bad("tojson: indent must be an int or a str");
    }
  }
  if (Given(p[2]) && !p[2].is_none()) {
    if (!p[2].is_list() || p[2].AsList().size() != 2 || !p[2].AsList()[0].is_string() ||
        !p[2].AsList()[1].is_string()) {
      return Bad("tojson: separators must be a pair of strings");
    }
    o.separators = std::make_pair(p[2].AsList()[0].AsString(), p[2].AsList()[1].AsString());
  }
  o.sort_keys = p[3].Truthy();
  ODMOE_ASSIGN_OR_RETURN(std::string s, ToJson(input, o));
  return Value::String(std::move(s));
}

// The key sort/unique/dictsort compare by: lower-cased strings unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::String(Lower(v.AsString()));
  return v;
}

// attribute="a.b" or an integer index, as jinja2's make_attrgetter.
absl::StatusOr<Value> Attribute(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_int()) return in.GetItem(item, attribute);
  Value v = item;
  for (const std::string& part : std::vector<std::string>(absl::StrSplit(attribute.Str(), '.'))) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    ODMOE_ASSIGN_OR_RETURN(
        v, in.GetItem(v, digits ? Value::Int(std::stoll(part)) : Value::String(part)));
  }
  return v;
}

absl::StatusOr<Value> SortFilter(Interpreter& in, const Value& input, CallArgs& args) {
  ODMOE_ASSIGN_OR_RETURN(auto p, Bind("sort", args, {"reverse", "case_sensitive", "attribute"}));
  ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& v : items) {
    Value key = v;
    if (Given(p[2]) && !p[2].is_none()) {
      ODMOE_ASSIGN_OR_RETURN(key, Attribute(in, v, p[2]));
    }
    keyed.emplace_back(SortKey(key, p[1].Truthy()), v);
  }
  absl::Status error;
  bool reverse = p[0].Truthy();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto r = reverse ? Less(b.first, a.first) : Less(a.first, b.first);
    if (!r.ok()) error = r.status();
    return r.ok() && *r;
  });
  ODMOE_RETURN_IF_ERROR(error);
  ValueList out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return Value::List(std::move(out));
}

// select / reject / selectattr / rejectattr.
absl::StatusOr<Value> SelectFilter(Interpreter& in, const std::string& name, const Value& input,
                                   CallArgs& args) {
  bool attr = absl::EndsWith(name, "attr");
  bool keep_if = absl::StartsWith(name, "select");
  ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input.Truthy() ? input : Value()));
  ValueList rest = args.positional;
  if (!args.keyword.empty()) return Bad(absl::StrCat(name, "() takes no keyword arguments"));
  Value attribute;
  if (attr) {
    if (rest.empty()) return Bad(absl::StrCat(name, "() needs an attribute"));
    attribute = rest[0];
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    ODMOE_ASSIGN_OR_RETURN(test, NeedString(name, rest[0]));
    rest.erase(rest.begin());
  }
  ValueList out;
  for (const Value& item : items) {
    ODMOE_RETURN_IF_ERROR(in.Step());
    Value v = item;
    if (attr) {
      ODMOE_ASSIGN_OR_RETURN(v, Attribute(in, item, attribute));
    }
    bool pass;
    if (test.empty()) {
      pass = v.Truthy();
    } else {
      CallArgs targs{rest, {}};
      ODMOE_ASSIGN_OR_RETURN(pass, in.ApplyTest(test, v, targs));
    }
    if (pass == keep_if) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

absl::StatusOr<Value> MapFilter(Interpreter& in, const Value& input, CallArgs& args) {
  ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input.Truthy() ? input : Value()));
  ValueList out;
  const Value* attribute = nullptr;
  const Value* def = nullptr;
  for (auto& [k, v] : args.keyword) {
    if (k == "attribute") {
      attribute = &v;
    } else if (k == "default") {
      def = &v;
    }
  }
  if (attribute != nullptr) {
    for (const Value& item : items) {
      ODMOE_ASSIGN_OR_RETURN(Value v, Attribute(in, item, *attribute));
      if (v.is_undefined() && def != nullptr) v = *def;
      out.push_back(std::move(v));
    }
    return Value::Generator(std::move(out));
  }
  if (args.positional.empty()) return Bad("map() needs a filter name or attribute=");
  ODMOE_ASSIGN_OR_RETURN(std::string filter, NeedString("map", args.positional[0]));
  CallArgs fargs{ValueList(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value& item : items) {
    ODMOE_RETURN_IF_ERROR(in.Step());
    CallArgs a = fargs;
    ODMOE_ASSIGN_OR_RETURN(Value v, in.ApplyFilter(filter, item, a));
    out.push_back(std::move(v));
  }
  return Value::Generator(std::move(out));
}

// Python's round() of a float: half to even (jinja2's "common" method).
double RoundHalfEven(double x, int64_t digits) {
  double scale = std::pow(10.0, static_cast<double>(digits));
  double y = x * scale;
  double r = std::nearbyint(y);
  return digits == 0 ? r : r / scale;
}

// jinja2's indent: the text plus "\n" split into lines; every line but the
// first padded (blank ones only with blank=True; the first with first=True).
absl::StatusOr<Value> IndentFilter(const Value& input, CallArgs& args) {
  ODMOE_ASSIGN_OR_RETURN(auto p, Bind("indent", args, {"width", "first", "blank"}));
  std::string pad = p[0].is_string()
                        ? p[0].AsString()
                        : std::string(Given(p[0]) ? std::max<int64_t>(0, p[0].AsInt()) : 4, ' ');
  std::vector<std::string> lines = SplitLines(input.Str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (p[2].Truthy() || !lines[i].empty())) out += pad;
    out += lines[i];
  }
  if (p[1].Truthy()) out = pad + out;
  return Value::String(out);
}

absl::StatusOr<Value> DictSortFilter(const Value& input, CallArgs& args) {
  ODMOE_ASSIGN_OR_RETURN(auto p, Bind("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (!input.is_dict()) return Bad("dictsort: expected a dict");
  bool by_value = p[1].is_string() && p[1].AsString() == "value";
  auto items = input.AsDict().items;
  absl::Status error;
  bool reverse = p[2].Truthy();
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
    Value ka = SortKey(by_value ? a.second : a.first, p[0].Truthy());
    Value kb = SortKey(by_value ? b.second : b.first, p[0].Truthy());
    auto r = reverse ? Less(kb, ka) : Less(ka, kb);
    if (!r.ok()) error = r.status();
    return r.ok() && *r;
  });
  ODMOE_RETURN_IF_ERROR(error);
  ValueList out;
  for (auto& [k, v] : items) out.push_back(Value::List({k, v}, true));
  return Value::List(std::move(out));
}

}  // namespace

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    len = std::min(len, s.size() - i);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

absl::StatusOr<ValueList> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return ValueList{};
    case Value::Kind::kList:
      return v.AsList();
    case Value::Kind::kString: {
      ValueList out;
      for (auto& c : CodePoints(v.AsString())) out.push_back(Value::String(std::move(c)));
      return out;
    }
    case Value::Kind::kDict: {
      ValueList out;
      for (const auto& [k, x] : v.AsDict().items) out.push_back(k);
      return out;
    }
    default:
      return Bad(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.depth() > kMaxValueDepth || b.depth() > kMaxValueDepth)
    return Bad("values nested too deeply to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsFloat() < b.AsFloat();
    return a.AsInt() < b.AsInt();
  }
  if (a.is_string() && b.is_string()) return a.AsString() < b.AsString();
  if (a.is_list() && b.is_list()) {
    const ValueList &x = a.AsList(), &y = b.AsList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) {
    return Bad(a.is_undefined() ? a.undefined_hint() : b.undefined_hint());
  }
  return Bad(absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '",
                          b.TypeName(), "'"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) return Bad("'in <string>' requires string as left operand");
    return container.AsString().find(item.AsString()) != std::string::npos;
  }
  if (container.is_dict()) return container.AsDict().FindKey(item) != nullptr;
  if (container.is_list()) {
    for (const Value& v : container.AsList()) {
      if (Equal(v, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  return Bad(absl::StrCat("argument of type '", container.TypeName(), "' is not iterable"));
}

std::optional<Value> Method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return StringMethod(obj, name);
  if (obj.is_dict() && !obj.AsDict().is_namespace) {
    if (name == "items") {
      return Bound(obj, name, [](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
        ODMOE_RETURN_IF_ERROR(Bind("items", args, {}).status());
        return ItemsOf(self);
      });
    }
    if (name == "keys" || name == "values") {
      bool keys = name == "keys";
      return Bound(obj, name, [keys](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
        ODMOE_RETURN_IF_ERROR(Bind(keys ? "keys" : "values", args, {}).status());
        ValueList out;
        for (const auto& [k, v] : self.AsDict().items) out.push_back(keys ? k : v);
        return Value::List(std::move(out));
      });
    }
    if (name == "get") {
      return Bound(obj, name, [](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
        ODMOE_ASSIGN_OR_RETURN(auto p, Bind("get", args, {"key", "default"}));
        const Value* v = self.AsDict().FindKey(p[0]);
        if (v != nullptr) return *v;
        return Given(p[1]) ? p[1] : Value::None();
      });
    }
    if (name == "copy") {
      return Bound(obj, name, [](const Value& self, CallArgs&) -> absl::StatusOr<Value> {
        return Value::Dict(std::make_shared<ValueDict>(self.AsDict()));
      });
    }
    for (const char* m : {"pop", "popitem", "update", "setdefault", "clear"}) {
      if (name == m) return Unsafe(obj, name);
    }
  }
  if (obj.is_list()) {
    if (name == "index" || name == "count") {
      bool index = name == "index";
      return Bound(obj, name, [index](const Value& self, CallArgs& args) -> absl::StatusOr<Value> {
        ODMOE_ASSIGN_OR_RETURN(auto p, Bind(index ? "index" : "count", args, {"value"}));
        int64_t n = 0;
        for (size_t i = 0; i < self.AsList().size(); ++i) {
          if (!Equal(self.AsList()[i], p[0])) continue;
          if (index) return Value::Int(i);
          ++n;
        }
        if (index) return Bad(absl::StrCat(p[0].Repr(), " is not in list"));
        return Value::Int(n);
      });
    }
    for (const char* m :
         {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}) {
      if (name == m) return Unsafe(obj, name);
    }
  }
  return std::nullopt;
}

absl::StatusOr<Value> Filter(Interpreter& in, const std::string& name, const Value& input,
                             CallArgs& args) {
  auto no_args = [&]() { return Bind(name, args, {}).status(); };
  if (name == "tojson") return ToJsonFilter(input, args);
  if (name == "safe" || name == "string") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (name == "string" && input.is_markup()) return input;
    return name == "safe" ? Value::Markup(input.Str()) : Value::String(input.Str());
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (input.is_markup() && name != "forceescape") return input;
    return Value::Markup(HtmlEscape(input.Str()));
  }
  if (name == "trim") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"chars"}));
    return Value::String(Strip(input.Str(), p[0], true, true));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    ODMOE_RETURN_IF_ERROR(no_args());
    std::string s = input.Str();
    return Value::String(name == "upper"   ? Upper(s)
                         : name == "lower" ? Lower(s)
                         : name == "title" ? JinjaTitle(s)
                                           : Capitalize(s));
  }
  if (name == "length" || name == "count") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if ((!input.is_string() && !input.is_list() && !input.is_dict() && !input.is_undefined()) ||
        input.is_generator()) {
      return Bad(absl::StrCat("object of type '", input.TypeName(), "' has no len()"));
    }
    return Value::Int(Length(input));
  }
  if (name == "first" || name == "last") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (name == "last" && input.is_generator()) return Bad("'generator' object is not reversible");
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    if (items.empty())
      return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"d", "attribute"}));
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += p[0].Str();
      Value v = items[i];
      if (Given(p[1]) && !p[1].is_none()) {
        ODMOE_ASSIGN_OR_RETURN(v, Attribute(in, v, p[1]));
      }
      out += v.Str();
    }
    return Value::String(out);
  }
  if (name == "replace") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"old", "new", "count"}));
    return Value::String(Replace(input.Str(), p[0].Str(), p[1].Str(),
                                 Given(p[2]) && !p[2].is_none() ? p[2].AsInt() : -1));
  }
  if (name == "default" || name == "d") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"default_value", "boolean"}));
    Value def = Given(p[0]) ? p[0] : Value::String("");
    if (input.is_undefined() || (p[1].Truthy() && !input.Truthy())) return def;
    return input;
  }
  if (name == "int") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"default", "base"}));
    Value def = Given(p[0]) ? p[0] : Value::Int(0);
    if (input.is_int() || input.is_bool()) return Value::Int(input.AsInt());
    if (input.is_float()) return Value::Int(static_cast<int64_t>(input.AsFloat()));
    if (input.is_string()) {
      std::string s = Strip(input.AsString(), Value(), true, true);
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(s.c_str(), &end, Given(p[1]) ? p[1].AsInt() : 10);
      if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::Int(v);
      double f = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(f))
        return Value::Int(static_cast<int64_t>(f));
    }
    return def;
  }
  if (name == "float") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"default"}));
    if (input.is_number()) return Value::Float(input.AsFloat());
    if (input.is_string()) {
      std::string s = Strip(input.AsString(), Value(), true, true);
      char* end = nullptr;
      double f = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return Value::Float(f);
    }
    return Given(p[0]) ? p[0] : Value::Float(0.0);
  }
  if (name == "list") {
    ODMOE_RETURN_IF_ERROR(no_args());
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    return Value::List(std::move(items));
  }
  if (name == "items") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (input.is_undefined()) return Value::Generator({});
    if (!input.is_dict()) return Bad("items: expected a mapping");
    return Value::Generator(ItemsOf(input).AsList());
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    return SelectFilter(in, name, input, args);
  }
  if (name == "map") return MapFilter(in, input, args);
  if (name == "indent") return IndentFilter(input, args);
  if (name == "round") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"precision", "method"}));
    int64_t digits = Given(p[0]) ? p[0].AsInt() : 0;
    std::string method = Given(p[1]) ? p[1].Str() : "common";
    if (!input.is_number()) return Bad("round: expected a number");
    double x = input.AsFloat();
    double scale = std::pow(10.0, static_cast<double>(digits));
    if (method == "common") {
      if (!input.is_float()) return Value::Int(input.AsInt());
      return Value::Float(RoundHalfEven(x, digits));
    }
    if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
    if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
    return Bad("round: method must be common, ceil or floor");
  }
  if (name == "abs") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (input.is_float()) return Value::Float(std::fabs(input.AsFloat()));
    if (input.is_number()) return Value::Int(std::llabs(input.AsInt()));
    return Bad(absl::StrCat("bad operand type for abs(): '", input.TypeName(), "'"));
  }
  if (name == "unique") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"case_sensitive", "attribute"}));
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    ValueList out, seen;
    for (const Value& v : items) {
      Value key = v;
      if (Given(p[1]) && !p[1].is_none()) {
        ODMOE_ASSIGN_OR_RETURN(key, Attribute(in, v, p[1]));
      }
      key = SortKey(key, p[0].Truthy());
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equal(s, key); }))
        continue;
      seen.push_back(key);
      out.push_back(v);
    }
    return Value::Generator(std::move(out));
  }
  if (name == "sort") return SortFilter(in, input, args);
  if (name == "dictsort") return DictSortFilter(input, args);
  if (name == "reverse") {
    ODMOE_RETURN_IF_ERROR(no_args());
    if (input.is_string()) {
      std::vector<std::string> chars = CodePoints(input.AsString());
      return Value::String(absl::StrJoin(chars.rbegin(), chars.rend(), ""));
    }
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    std::reverse(items.begin(), items.end());
    return Value::Generator(std::move(items));
  }
  if (name == "batch") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"linecount", "fill_with"}));
    if (!p[0].is_int() || p[0].AsInt() <= 0)
      return Bad("batch: linecount must be a positive integer");
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    ValueList out, row;
    for (const Value& v : items) {
      row.push_back(v);
      if (static_cast<int64_t>(row.size()) == p[0].AsInt())
        out.push_back(Value::List(std::move(row))), row = {};
    }
    if (!row.empty()) {
      if (Given(p[1]) && !p[1].is_none()) {
        while (static_cast<int64_t>(row.size()) < p[0].AsInt()) row.push_back(p[1]);
      }
      out.push_back(Value::List(std::move(row)));
    }
    return Value::Generator(std::move(out));
  }
  if (name == "sum") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"attribute", "start"}));
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    Value total = Given(p[1]) ? p[1] : Value::Int(0);
    for (const Value& v : items) {
      Value x = v;
      if (Given(p[0]) && !p[0].is_none()) {
        ODMOE_ASSIGN_OR_RETURN(x, Attribute(in, v, p[0]));
      }
      if (!x.is_number() || !total.is_number()) return Bad("sum: expected numbers");
      total = (x.is_float() || total.is_float()) ? Value::Float(total.AsFloat() + x.AsFloat())
                                                 : Value::Int(total.AsInt() + x.AsInt());
    }
    return total;
  }
  if (name == "min" || name == "max") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"case_sensitive", "attribute"}));
    ODMOE_ASSIGN_OR_RETURN(ValueList items, Iterate(input));
    if (items.empty())
      return Value::Undefined(absl::StrCat("No aggregated item, sequence was empty."));
    Value best = items[0];
    for (const Value& v : items) {
      ODMOE_ASSIGN_OR_RETURN(bool less,
                             Less(SortKey(v, p[0].Truthy()), SortKey(best, p[0].Truthy())));
      if (name == "min" ? less : false) best = v;
      if (name == "max") {
        ODMOE_ASSIGN_OR_RETURN(bool greater,
                               Less(SortKey(best, p[0].Truthy()), SortKey(v, p[0].Truthy())));
        if (greater) best = v;
      }
    }
    return best;
  }
  if (name == "wordcount") {
    ODMOE_RETURN_IF_ERROR(no_args());
    return Value::Int(Split(input.Str(), Value(), -1, false).size());
  }
  if (name == "format") {
    if (!input.is_string()) return Bad("format: expected a string");
    Value packed = Value::List(args.positional, true);
    return PercentFormat(input.AsString(), packed);
  }
  if (name == "attr") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"name"}));
    if (std::optional<Value> m = Method(input, p[0].Str())) return *m;
    return Value::Undefined(
        absl::StrCat("'", input.TypeName(), " object' has no attribute '", p[0].Str(), "'"));
  }
  if (name == "center") {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"width"}));
    std::string s = input.Str();
    int64_t width = Given(p[0]) ? p[0].AsInt() : 80;
    int64_t len = CodePoints(s).size();
    if (width <= len) return Value::String(s);
    int64_t total = width - len;
    int64_t left = total / 2 + (total & width & 1);
    return Value::String(std::string(left, ' ') + s + std::string(total - left, ' '));
  }
  return Bad(absl::StrCat("unknown filter '", name, "'"));
}

absl::StatusOr<bool> Test(Interpreter& in, const std::string& name, const Value& v,
                          CallArgs& args) {
  auto one = [&]() -> absl::StatusOr<Value> {
    ODMOE_ASSIGN_OR_RETURN(auto p, Bind(name, args, {"other"}));
    return p[0];
  };
  auto none = [&]() { return Bind(name, args, {}).status(); };
  if (name == "defined" || name == "undefined") {
    ODMOE_RETURN_IF_ERROR(none());
    return v.is_undefined() == (name == "undefined");
  }
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.AsBool();
  if (name == "false") return v.is_bool() && !v.AsBool();
  if (name == "mapping") return v.is_dict() && !v.AsDict().is_namespace;
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_dict() || v.is_undefined();
  if (name == "sequence")
    return (v.is_list() && !v.is_generator()) || v.is_string() ||
           (v.is_dict() && !v.AsDict().is_namespace);
  if (name == "callable") return v.is_callable() || (v.is_dict() && v.AsDict().call != nullptr);
  if (name == "lower" || name == "upper") {
    std::string s = v.Str();
    return name == "lower" ? s == Lower(s) : s == Upper(s);
  }
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool())
      return Bad(absl::StrCat("test '", name, "': expected an integer"));
    return (v.AsInt() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    ODMOE_ASSIGN_OR_RETURN(Value d, one());
    if (!v.is_number() || !d.is_number()) return Bad("divisibleby: expected numbers");
    if (d.AsFloat() == 0) return Bad("integer division or modulo by zero");
    if (v.is_float() || d.is_float()) return std::fmod(v.AsFloat(), d.AsFloat()) == 0;
    return v.AsInt() % d.AsInt() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    if (name == "sameas" && v.kind() != o.kind()) return false;
    return Equal(v, o);
  }
  if (name == "ne" || name == "!=") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    return !Equal(v, o);
  }
  if (name == "lt" || name == "<" || name == "lessthan") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    return Less(v, o);
  }
  if (name == "gt" || name == ">" || name == "greaterthan") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    return Less(o, v);
  }
  if (name == "le" || name == "<=") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    ODMOE_ASSIGN_OR_RETURN(bool gt, Less(o, v));
    return !gt;
  }
  if (name == "ge" || name == ">=") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    ODMOE_ASSIGN_OR_RETURN(bool lt, Less(v, o));
    return !lt;
  }
  if (name == "in") {
    ODMOE_ASSIGN_OR_RETURN(Value o, one());
    return Contains(o, v);
  }
  (void)in;
  return Bad(absl::StrCat("unknown test '", name, "'"));
}

void AddGlobals(Frame* globals, std::function<std::string(const std::string&)> strftime_now) {
  globals->Set(
      "range", Value::Function("range", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
        ODMOE_ASSIGN_OR_RETURN(auto p, Bind("range", args, {"a", "b", "c"}));
        for (const Value& x : p) {
          if (Given(x) && !x.is_int() && !x.is_bool()) return Bad("range: expected integers");
        }
        int64_t start = 0, stop = 0, step = 1;
        if (!Given(p[1])) {
          stop = p[0].AsInt();
        } else {
          start = p[0].AsInt();
          stop = p[1].AsInt();
          if (Given(p[2])) step = p[2].AsInt();
        }
        if (step == 0) return Bad("range() arg 3 must not be zero");
        int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
        if (n > 100000)
          return Bad("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        ValueList out;
        for (int64_t i = 0; i < n; ++i) out.push_back(Value::Int(start + i * step));
        return Value::List(std::move(out));
      }));
  auto make_dict = [](bool ns) {
    return [ns](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
      auto d = std::make_shared<ValueDict>();
      d->is_namespace = ns;
      for (const Value& p : args.positional) {
        if (!p.is_dict()) return Bad(ns ? "namespace() takes a mapping" : "dict() takes a mapping");
        for (const auto& [k, v] : p.AsDict().items) d->SetKey(k, v);
      }
      for (auto& [k, v] : args.keyword) d->Set(k, v);
      return Value::Dict(d);
    };
  };
  globals->Set("namespace", Value::Function("namespace", make_dict(true)));
  globals->Set("dict", Value::Function("dict", make_dict(false)));
  globals->Set(
      "raise_exception",
      Value::Function("raise_exception", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
        std::string message = args.positional.empty() ? "" : args.positional[0].Str();
        return Bad(absl::StrCat("raise_exception: ", message));
      }));
  globals->Set(
      "strftime_now",
      Value::Function(
          "strftime_now", [strftime_now](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
            ODMOE_ASSIGN_OR_RETURN(auto p, Bind("strftime_now", args, {"format"}));
            ODMOE_ASSIGN_OR_RETURN(std::string format, NeedString("strftime_now", p[0]));
            return Value::String(strftime_now(format));
          }));
}

}  // namespace odmoe::jinja
