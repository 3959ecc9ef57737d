// JsonSchemaToGbnf: one GBNF rule per schema node, named after its path;
// shared JSON rules (json-string, json-number, ...) added when used.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_regex.h"

namespace odmoe {
namespace {

using json = nlohmann::ordered_json;

/// The shared rules: name, body, the shared rules the body uses.
struct SharedRule {
  const char* name;
  const char* body;
  const char* uses;
};
constexpr SharedRule kSharedRules[] = {
    {"ws", R"([ \t\n]{0,20})", ""},
    {"json-hex", R"([0-9a-fA-F])", ""},
    {"json-hex4", R"([0-9a-cA-CeEfF] json-hex{3} | [dD] [0-7] json-hex{2})", "json-hex"},
    {"json-char", R"([^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" json-hex4))", "json-hex4"},
    {"json-string", R"("\"" json-char* "\"")", "json-char"},
    {"json-digits", R"("0" | [1-9] [0-9]{0,19})", ""},
    {"json-int", R"("-"? json-digits)", "json-digits"},
    {"json-frac", R"("." [0-9]{1,24})", ""},
    {"json-exp", R"([eE] [-+]? [0-9]{1,3})", ""},
    {"json-frac-nonzero", R"("." "0"{0,12} [1-9] [0-9]{0,11})", ""},
    {"json-number", R"("-"? json-digits json-frac? json-exp?)", "json-digits json-frac json-exp"},
    {"json-boolean", R"("true" | "false")", ""},
    {"json-null", R"("null")", ""},
    {"json-value",
     "json-object | json-array | json-string | json-number | json-boolean | json-null",
     "json-object json-array json-string json-number json-boolean json-null"},
    {"json-member", R"(json-string ws ":" ws json-value ws)", "json-string ws json-value"},
    {"json-object", R"("{" ws (json-member ("," ws json-member)*)? "}")", "ws json-member"},
    {"json-array", R"("[" ws (json-value ws ("," ws json-value ws)*)? "]")", "ws json-value"},
    // Formats, as Python jsonschema's FormatChecker checks them (a date is a
    // real day of years 0001-9999).
    {"json-2d", R"([0-9] [0-9])", ""},
    {"json-year", R"([1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9])))", ""},
    {"json-leap-year",
     R"([0-9]{2} ([02468] [48] | [13579] [26] | [2468] "0") | ([02468] [48] | [13579] [26] | [2468] "0") "00")",
     ""},
    {"json-date-body",
     R"(json-year "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
     R"(("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])) | )"
     R"(json-leap-year "-02-29")",
     "json-year json-leap-year"},
    {"json-time-body",
     R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" ([0-5] [0-9] | "60") ("." [0-9]{1,9})? )"
     R"(([zZ] | [-+] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
     ""},
    {"json-date", R"("\"" json-date-body "\"")", "json-date-body"},
    {"json-time", R"("\"" json-time-body "\"")", "json-time-body"},
    {"json-date-time", R"("\"" json-date-body [tT] json-time-body "\"")",
     "json-date-body json-time-body"},
    {"json-uuid",
     R"("\"" json-hex{8} "-" json-hex{4} "-" json-hex{4} "-" json-hex{4} "-" json-hex{12} "\"")",
     "json-hex"},
    {"json-email",
     R"("\"" [a-zA-Z0-9._%+-]{1,64} "@" [a-zA-Z0-9-]{1,63} ("." [a-zA-Z0-9-]{1,63}){0,8} "\"")",
     ""},
    {"json-ipv4-part", R"([0-9] | [1-9] [0-9] | "1" [0-9] [0-9] | "2" [0-4] [0-9] | "25" [0-5])",
     ""},
    {"json-ipv4", R"("\"" json-ipv4-part ("." json-ipv4-part){3} "\"")", "json-ipv4-part"},
};
constexpr std::pair<const char*, const char*> kFormats[] = {
    {"date", "json-date"}, {"time", "json-time"},   {"date-time", "json-date-time"},
    {"uuid", "json-uuid"}, {"email", "json-email"}, {"ipv4", "json-ipv4"},
};

/// Keywords that narrow what is valid and that the grammar cannot express;
/// `allowed` is a value that narrows nothing (null: none).
struct Unsupported {
  const char* keyword;
  json allowed;
};
const std::vector<Unsupported>& UnsupportedKeywords() {
  static const std::vector<Unsupported> table = {
      {"not", nullptr},
      {"if", nullptr},
      {"then", nullptr},
      {"else", nullptr},
      {"multipleOf", nullptr},
      {"uniqueItems", false},
      {"contains", nullptr},
      {"minContains", nullptr},
      {"maxContains", nullptr},
      {"patternProperties", nullptr},
      {"propertyNames", nullptr},
      {"dependentRequired", nullptr},
      {"dependentSchemas", nullptr},
      {"dependencies", nullptr},
      {"minProperties", 0},
      {"maxProperties", nullptr},
      {"unevaluatedProperties", nullptr},
      {"unevaluatedItems", nullptr},
      {"$dynamicRef", nullptr},
      {"$recursiveRef", nullptr},
  };
  return table;
}

/// Keywords that say nothing about validity.
bool IsAnnotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",           "description", "default",     "examples",
      "$comment",        "$schema",     "$id",         "$anchor",
      "deprecated",      "readOnly",    "writeOnly",   "contentMediaType",
      "contentEncoding", "$defs",       "definitions", "discriminator",
      "nullable_marker", "strict"};
  return kAnnotations.contains(k);
}

std::string GbnfLiteral(std::string_view bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string RuleNamePart(std::string_view hint) {
  std::string out;
  for (const char c : hint) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    out += ok ? c : '-';
  }
  if (out.size() > 40) out.resize(40);
  return out.empty() ? "x" : out;
}

/// Decimal digits of v >= 0.
int Digits(uint64_t v) {
  int d = 1;
  while (v >= 10) v /= 10, ++d;
  return d;
}

/// GBNF for the decimal strings of [x, y] (equal length, digits only,
/// leading zeros allowed: a suffix of a longer number).
std::string SameLengthRange(const std::string& x, const std::string& y) {
  if (x.empty()) return "\"\"";
  if (x == y) return GbnfLiteral(x);
  auto digit_class = [](char a, char b) {
    return a == b ? GbnfLiteral(std::string(1, a))
                  : absl::StrCat("[", std::string(1, a), "-", std::string(1, b), "]");
  };
  const size_t rest = x.size() - 1;
  auto any_digits = [&]() -> std::string {
    return rest == 0 ? "" : absl::StrCat(" [0-9]{", rest, "}");
  };
  if (x[0] == y[0])
    return absl::StrCat(GbnfLiteral(x.substr(0, 1)), " (",
                        SameLengthRange(x.substr(1), y.substr(1)), ")");
  const std::string zeros(rest, '0'), nines(rest, '9');
  std::vector<std::string> alts;
  char lo = x[0], hi = y[0];
  if (x.substr(1) != zeros) {
    alts.push_back(
        absl::StrCat(GbnfLiteral(x.substr(0, 1)), " (", SameLengthRange(x.substr(1), nines), ")"));
    ++lo;
  }
  std::string last;
  if (y.substr(1) != nines) {
    last =
        absl::StrCat(GbnfLiteral(y.substr(0, 1)), " (", SameLengthRange(zeros, y.substr(1)), ")");
    --hi;
  }
  if (lo <= hi) alts.push_back(absl::StrCat(digit_class(lo, hi), any_digits()));
  if (!last.empty()) alts.push_back(last);
  return absl::StrJoin(alts, " | ");
}

/// GBNF for the numbers [lo, hi] (hi < 0: unbounded) written without
/// leading zeros, at most 20 digits.
std::string NonNegativeRange(uint64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const int max_digits = 20;
  const int top = hi < 0 ? max_digits : Digits(static_cast<uint64_t>(hi));
  for (int len = Digits(lo); len <= top; ++len) {
    const uint64_t first = len == 1 ? 0 : static_cast<uint64_t>(std::pow(10.0, len - 1));
    if (hi < 0 && first > lo && len > Digits(lo)) {
      alts.push_back(absl::StrCat("[1-9] [0-9]{", len - 1, ",", max_digits - 1, "}"));
      break;
    }
    const uint64_t a = std::max(lo, first);
    const uint64_t b =
        (hi < 0 || len < top)
            ? (len >= 20 ? UINT64_MAX : static_cast<uint64_t>(std::pow(10.0, len)) - 1)
            : static_cast<uint64_t>(hi);
    if (a > b) continue;
    alts.push_back(absl::StrCat("(", SameLengthRange(std::to_string(a), std::to_string(b)), ")"));
  }
  return alts.empty() ? "" : absl::StrJoin(alts, " | ");
}

class Converter {
 public:
  Converter(const json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

  absl::StatusOr<std::string> Run() {
    auto expr = Visit(root_, "", "root", 0);
    if (!expr.ok()) return expr.status();
    std::string out = absl::StrCat(options_.root_rule, " ::= ", *expr, "\n");
    for (const auto& [name, body] : rules_) absl::StrAppend(&out, name, " ::= ", body, "\n");
    if (out.size() > kMaxGbnfBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "json_schema: the grammar would take ", out.size(), " bytes, more than ", kMaxGbnfBytes));
    }
    return out;
  }

 private:
  static absl::Status Error(const std::string& path, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("json_schema ", path.empty() ? "/" : path, ": ", what));
  }

  std::string Shared(const std::string& name) {
    if (shared_used_.insert(name).second) {
      for (const SharedRule& r : kSharedRules) {
        if (name != r.name) continue;
        for (const auto& dep : absl::StrSplit(r.uses, ' ', absl::SkipEmpty()))
          Shared(std::string(dep));
        rules_.emplace_back(r.name, r.body);
      }
    }
    return name;
  }
  std::string NewRule(const std::string& hint, const std::string& body) {
    const std::string base = options_.rule_prefix + RuleNamePart(hint);
    std::string name = base;
    for (int i = 2; names_.contains(name) || name == options_.root_rule ||
                    name.starts_with("json-") || name == "ws";
         ++i) {
      name = absl::StrCat(base, "-", i);
    }
    names_.insert(name);
    rules_.emplace_back(name, body);
    return name;
  }
  void SetBody(const std::string& name, const std::string& body) {
    for (auto& r : rules_) {
      if (r.first == name) r.second = body;
    }
  }
  absl::Status Grow() {
    if (++nodes_ > 100000) return Error("", "the schema has too many nodes");
    return absl::OkStatus();
  }

  absl::StatusOr<const json*> Resolve(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#')
      return Error(path, absl::StrCat("$ref '", ref,
                                      "': only references inside the schema (#...) are supported"));
    if (ref == "#") return &root_;
    try {
      const json::json_pointer ptr(ref.substr(1));
      if (!root_.contains(ptr))
        return Error(path, absl::StrCat("$ref '", ref, "' points at nothing"));
      return &root_.at(ptr);
    } catch (const json::exception&) {
      return Error(path, absl::StrCat("$ref '", ref, "' is not a JSON pointer"));
    }
  }

  /// allOf and $ref with siblings: the subschemas merged into one object
  /// schema (properties and required joined, other keywords equal or only
  /// in one).
  absl::StatusOr<json> Merge(const json& parts, const std::string& path, int depth) {
    json merged = json::object();
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string at = absl::StrCat(path, "/allOf/", i);
      json part = parts[i];
      for (int hops = 0; part.is_object() && part.contains("$ref"); ++hops) {
        if (hops > kMaxSchemaDepth) return Error(at, "$ref chain too long");
        auto target = Resolve(part["$ref"].get<std::string>(), at);
        if (!target.ok()) return target.status();
        json rest = part;
        rest.erase("$ref");
        part = **target;
        if (!part.is_object()) break;
        for (auto& [k, v] : rest.items()) part[k] = v;
      }
      if (part.is_object() && part.contains("allOf")) {
        if (depth > kMaxSchemaDepth) return Error(at, "allOf nested too deep");
        json inner = part["allOf"];
        part.erase("allOf");
        inner.push_back(part);
        auto m = Merge(inner, at, depth + 1);
        if (!m.ok()) return m.status();
        part = *m;
      }
      if (part == json(true)) continue;
      if (!part.is_object()) return Error(at, "allOf member must be an object schema");
      for (auto& [k, v] : part.items()) {
        if (k == "properties") {
          for (auto& [name, sub] : v.items()) {
            if (merged["properties"].contains(name) && merged["properties"][name] != sub) {
              merged["properties"][name] =
                  json{{"allOf", json::array({merged["properties"][name], sub})}};
            } else {
              merged["properties"][name] = sub;
            }
          }
        } else if (k == "required") {
          for (const auto& r : v) {
            if (!merged.contains("required") ||
                std::find(merged["required"].begin(), merged["required"].end(), r) ==
                    merged["required"].end()) {
              merged["required"].push_back(r);
            }
          }
        } else if (IsAnnotation(k)) {
          continue;
        } else if (merged.contains(k) && merged[k] != v) {
          return Error(at,
                       absl::StrCat("allOf: '", k, "' differs between members (not supported)"));
        } else {
          merged[k] = v;
        }
      }
    }
    return merged;
  }

  absl::StatusOr<std::string> Visit(const json& s, const std::string& path, const std::string& hint,
                                    int depth) {
    if (depth > kMaxSchemaDepth)
      return Error(path, absl::StrCat("nested deeper than ", kMaxSchemaDepth));
    if (absl::Status g = Grow(); !g.ok()) return g;
    if (s.is_boolean()) {
      if (s.get<bool>()) return Shared("json-value");
      return Error(path, "the schema false accepts nothing");
    }
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    for (const Unsupported& u : UnsupportedKeywords()) {
      if (s.contains(u.keyword) && !(u.allowed != nullptr && s[u.keyword] == u.allowed)) {
        return Error(absl::StrCat(path, "/", u.keyword),
                     absl::StrCat("'", u.keyword, "' is not supported"));
      }
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Error(path + "/$ref", "must be a string");
      const std::string ref = s["$ref"];
      bool siblings = false;
      for (auto& [k, v] : s.items()) siblings = siblings || (k != "$ref" && !IsAnnotation(k));
      if (!siblings) return RefRule(ref, path, depth);
      json rest = s;
      rest.erase("$ref");
      return Visit(json{{"allOf", json::array({json{{"$ref", ref}}, rest})}}, path, hint,
                   depth + 1);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].empty())
        return Error(path + "/allOf", "must be a non-empty array");
      json parts = s["allOf"];
      json rest = s;
      rest.erase("allOf");
      parts.push_back(rest);
      auto merged = Merge(parts, path, depth);
      if (!merged.ok()) return merged.status();
      return Visit(*merged, path, hint, depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& branches = s[key];
      if (!branches.is_array() || branches.empty())
        return Error(absl::StrCat(path, "/", key), "must be a non-empty array");
      json rest = s;
      rest.erase(key);
      bool siblings = false;
      for (auto& [k, v] : rest.items()) siblings = siblings || !IsAnnotation(k);
      std::vector<std::string> alts;
      for (size_t i = 0; i < branches.size(); ++i) {
        const std::string at = absl::StrCat(path, "/", key, "/", i);
        json branch = siblings ? json{{"allOf", json::array({rest, branches[i]})}} : branches[i];
        auto e = Visit(branch, at, absl::StrCat(hint, "-", i), depth + 1);
        if (!e.ok()) return e.status();
        alts.push_back(*e);
      }
      return NewRule(hint, absl::StrJoin(alts, " | "));
    }
    if (s.contains("const")) return NewRule(hint, GbnfLiteral(s["const"].dump()));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return Error(path + "/enum", "must be a non-empty array");
      std::vector<std::string> alts;
      for (const json& v : s["enum"]) {
        if (s.contains("type") && !MatchesType(v, s["type"])) continue;
        alts.push_back(GbnfLiteral(v.dump()));
      }
      if (alts.empty()) return Error(path + "/enum", "no value of the schema's type");
      return NewRule(hint, absl::StrJoin(alts, " | "));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t);
      } else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string())
            return Error(path + "/type", "must be a string or an array of strings");
          types.push_back(e);
        }
      } else {
        return Error(path + "/type", "must be a string or an array of strings");
      }
    } else {
      types = ImpliedTypes(s);
      if (types.empty()) return Shared("json-value");
    }
    if (std::find(types.begin(), types.end(), "number") != types.end())
      std::erase(types, std::string("integer"));
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      auto e = VisitType(t, s, path, types.size() == 1 ? hint : absl::StrCat(hint, "-", t), depth);
      if (!e.ok()) return e.status();
      alts.push_back(*e);
    }
    if (alts.size() == 1) return alts[0];
    return NewRule(hint, absl::StrJoin(alts, " | "));
  }

  static bool MatchesType(const json& v, const json& type) {
    auto one = [&](const std::string& t) {
      if (t == "string") return v.is_string();
      if (t == "integer")
        return v.is_number_integer() ||
               (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
      if (t == "number") return v.is_number();
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      return false;
    };
    if (type.is_string()) return one(type);
    if (type.is_array()) {
      for (const json& t : type) {
        if (t.is_string() && one(t)) return true;
      }
    }
    return false;
  }

  /// Without `type`: the types whose keywords appear (the others are
  /// unconstrained, so any value of them is valid too).
  static std::vector<std::string> ImpliedTypes(const json& s) {
    static const std::map<std::string, std::string> kKeywordType = {
        {"properties", "object"},
        {"required", "object"},
        {"additionalProperties", "object"},
        {"items", "array"},
        {"prefixItems", "array"},
        {"minItems", "array"},
        {"maxItems", "array"},
        {"minLength", "string"},
        {"maxLength", "string"},
        {"pattern", "string"},
        {"format", "string"},
        {"minimum", "number"},
        {"maximum", "number"},
        {"exclusiveMinimum", "number"},
        {"exclusiveMaximum", "number"}};
    bool constrained = false;
    for (auto& [k, v] : s.items()) constrained = constrained || kKeywordType.contains(k);
    if (!constrained) return {};
    return {"object", "array", "string", "number", "boolean", "null"};
  }

  absl::StatusOr<std::string> RefRule(const std::string& ref, const std::string& path, int depth) {
    if (const auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
    auto target = Resolve(ref, path);
    if (!target.ok()) return target.status();
    const std::string hint = ref == "#" ? "root-ref" : ref.substr(ref.rfind('/') + 1);
    const std::string name = NewRule(hint, "\"\"");
    ref_rules_[ref] = name;
    auto e = Visit(**target, ref.substr(1), name + "-body", depth + 1);
    if (!e.ok()) return e.status();
    SetBody(name, *e);
    return name;
  }

  absl::StatusOr<std::string> VisitType(const std::string& type, const json& s,
                                        const std::string& path, const std::string& hint,
                                        int depth) {
    if (type == "string") return StringRule(s, path, hint);
    if (type == "integer" || type == "number") return NumberRule(s, path, hint, type == "integer");
    if (type == "boolean") return Shared("json-boolean");
    if (type == "null") return Shared("json-null");
    if (type == "object") return ObjectRule(s, path, hint, depth);
    if (type == "array") return ArrayRule(s, path, hint, depth);
    return Error(path + "/type", absl::StrCat("unknown type '", type, "'"));
  }

  absl::StatusOr<std::optional<int64_t>> Count(const json& s, const char* key,
                                               const std::string& path) {
    if (!s.contains(key)) return std::optional<int64_t>();
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return Error(absl::StrCat(path, "/", key), "must be a non-negative integer");
    }
    if (v.get<int64_t>() > 100000)
      return Error(absl::StrCat(path, "/", key), "over 100000 is not supported");
    return std::optional<int64_t>(v.get<int64_t>());
  }

  /// `item` repeated min..max times (max -1: unbounded), every repetition
  /// count in the text at most kMaxRepetition.
  static std::string Repeat(const std::string& item, int64_t min, int64_t max) {
    std::string out;
    for (int64_t n = min; n > 0;) {
      const int64_t k = std::min<int64_t>(n, kMaxRepetition);
      absl::StrAppend(&out, " (", item, "){", k, "}");
      n -= k;
    }
    if (max < 0) {
      absl::StrAppend(&out, " (", item, ")*");
    } else if (max > min) {
      absl::StrAppend(&out, " ", UpTo(item, max - min));
    }
    return out.empty() ? "\"\"" : out;
  }
  /// item{0,n} for any n: fewer than kMaxRepetition, or kMaxRepetition and
  /// then up to n - kMaxRepetition more (two live branches at a time).
  static std::string UpTo(const std::string& item, int64_t n) {
    if (n <= kMaxRepetition) return absl::StrCat("(", item, "){0,", n, "}");
    return absl::StrCat("((", item, "){", kMaxRepetition, "} ", UpTo(item, n - kMaxRepetition),
                        " | (", item, "){0,", kMaxRepetition - 1, "})");
  }

  absl::StatusOr<std::string> StringRule(const json& s, const std::string& path,
                                         const std::string& hint) {
    auto min = Count(s, "minLength", path);
    if (!min.ok()) return min.status();
    auto max = Count(s, "maxLength", path);
    if (!max.ok()) return max.status();
    const bool lengths = (min->has_value() && **min > 0) || max->has_value();
    if (s.contains("pattern")) {
      if (lengths)
        return Error(path + "/pattern",
                     "pattern together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) return Error(path + "/pattern", "must be a string");
      auto body = RegexToGbnf(s["pattern"].get<std::string>());
      if (!body.ok()) return Error(path + "/pattern", std::string(body.status().message()));
      Shared("json-char");
      return NewRule(hint, absl::StrCat("\"\\\"\" ", *body, " \"\\\"\""));
    }
    if (s.contains("format") && s["format"].is_string()) {
      for (const auto& [format, rule] : kFormats) {
        if (s["format"] != format) continue;
        if (lengths)
          return Error(path + "/format",
                       "format together with minLength/maxLength is not supported");
        return Shared(rule);
      }
    }
    if (!lengths) return Shared("json-string");
    const int64_t lo = min->value_or(0);
    const int64_t hi = max->has_value() ? **max : -1;
    if (hi >= 0 && hi < lo) return Error(path, "maxLength below minLength accepts nothing");
    Shared("json-char");
    return NewRule(hint, absl::StrCat("\"\\\"\"", Repeat("json-char", lo, hi), " \"\\\"\""));
  }

  /// minimum / maximum / exclusiveMinimum / exclusiveMaximum, read.
  struct Bounds {
    std::optional<int64_t> lo, hi;          // the integers allowed: [lo, hi]
    std::optional<int64_t> raw_lo, raw_hi;  // the tightest bounds' values (when integral)
    bool integral = true;                   // every bound is an integer value
  };
  absl::StatusOr<Bounds> ReadBounds(const json& s, const std::string& path) {
    Bounds b;
    auto tighten = [](std::optional<int64_t>& slot, int64_t v, bool upper) {
      slot = slot.has_value() ? (upper ? std::min(*slot, v) : std::max(*slot, v)) : v;
    };
    for (auto [key, upper, exclusive] :
         {std::tuple{"minimum", false, false}, std::tuple{"maximum", true, false},
          std::tuple{"exclusiveMinimum", false, true},
          std::tuple{"exclusiveMaximum", true, true}}) {
      if (!s.contains(key)) continue;
      const json& v = s[key];
      const std::string at = absl::StrCat(path, "/", key);
      if (v.is_boolean()) return Error(at, "draft-4 boolean form is not supported");
      if (!v.is_number()) return Error(at, "must be a number");
      const double d = v.get<double>();
      if (!(std::abs(d) <= 9e18)) return Error(at, "out of range");
      const bool whole = std::floor(d) == d;
      b.integral = b.integral && whole;
      int64_t n = upper ? static_cast<int64_t>(std::floor(d)) : static_cast<int64_t>(std::ceil(d));
      if (whole) tighten(upper ? b.raw_hi : b.raw_lo, n, upper);
      if (exclusive && whole) n += upper ? -1 : 1;
      tighten(upper ? b.hi : b.lo, n, upper);
    }
    return b;
  }

  /// Integers in [lo, hi] (either unbounded).
  static std::string IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<std::string> alts;
    // Negative part: "-" then |v| in [max(1, -hi), -lo].
    if (!lo.has_value() || *lo < 0) {
      const uint64_t a = hi.has_value() && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
      const int64_t b = lo.has_value() ? -*lo : -1;
      const std::string mag = NonNegativeRange(a, b);
      if (!mag.empty()) alts.push_back(absl::StrCat("\"-\" (", mag, ")"));
    }
    if (!hi.has_value() || *hi >= 0) {
      const uint64_t a = lo.has_value() && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      const std::string mag = NonNegativeRange(a, hi.has_value() ? *hi : -1);
      if (!mag.empty()) alts.push_back(absl::StrCat("(", mag, ")"));
    }
    return absl::StrJoin(alts, " | ");
  }

  absl::StatusOr<std::string> NumberRule(const json& s, const std::string& path,
                                         const std::string& hint, bool integer) {
    auto bounds = ReadBounds(s, path);
    if (!bounds.ok()) return bounds.status();
    const auto [lo, hi, raw_lo, raw_hi, integral] = *bounds;
    if (!lo && !hi) return Shared(integer ? "json-int" : "json-number");
    const bool integers = !(lo && hi && *lo > *hi);
    if (integer) {
      if (!integers) return Error(path, "the bounds leave no integer");
      return NewRule(hint, IntegerRange(lo, hi));
    }
    if (!integral)
      return Error(path,
                   "bounds on a number must be integers (fractional bounds are not supported)");
    // The integers in range, written with or without a fraction of zeros;
    // then the other numbers by sign: +-I.F with F not all zeros, strictly
    // inside (raw_lo, raw_hi): I in [max(raw_lo, 0), raw_hi - 1] for the
    // positive ones, I in [max(0, -raw_hi), -raw_lo - 1] for the negative ones.
    Shared("json-frac-nonzero");
    std::vector<std::string> alts;
    if (integers) alts.push_back(absl::StrCat("(", IntegerRange(lo, hi), ") (\".\" \"0\"{1,24})?"));
    if (!raw_hi || *raw_hi >= 1) {
      const uint64_t a = raw_lo && *raw_lo > 0 ? *raw_lo : 0;
      const int64_t b = raw_hi ? *raw_hi - 1 : -1;
      if (!raw_hi || static_cast<int64_t>(a) <= b) {
        alts.push_back(absl::StrCat("(", NonNegativeRange(a, b), ") json-frac-nonzero"));
      }
    }
    if (!raw_lo || *raw_lo <= -1) {
      const uint64_t a = raw_hi && *raw_hi < 0 ? static_cast<uint64_t>(-*raw_hi) : 0;
      const int64_t b = raw_lo ? -*raw_lo - 1 : -1;
      if (!raw_lo || static_cast<int64_t>(a) <= b) {
        alts.push_back(absl::StrCat("\"-\" (", NonNegativeRange(a, b), ") json-frac-nonzero"));
      }
    }
    if (alts.empty()) return Error(path, "the bounds leave no number");
    return NewRule(hint, absl::StrJoin(alts, " | "));
  }

  absl::StatusOr<std::string> ObjectRule(const json& s, const std::string& path,
                                         const std::string& hint, int depth) {
    Shared("ws");
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) return Error(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Error(path + "/required", "must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Error(path + "/required", "must hold strings");
        if (!props.contains(r.get<std::string>())) {
          return Error(path + "/required",
                       absl::StrCat("'", r.get<std::string>(),
                                    "' is required but not in properties (not supported)"));
        }
        required.insert(r);
      }
    }
    // Extra properties: false (none), true/absent (any value), or a schema.
    std::optional<std::string> extra_value;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a != json(false)) {
        auto e = Visit(a, path + "/additionalProperties", hint + "-additional", depth + 1);
        if (!e.ok()) return e.status();
        extra_value = *e;
      }
    } else if (!(options_.strict && s.contains("properties"))) {
      extra_value = Shared("json-value");
    }
    if (props.empty() && !s.contains("required") && extra_value == "json-value")
      return Shared("json-object");
    std::vector<std::string> kvs;
    std::vector<std::string> keys;
    for (auto& [name, sub] : props.items()) {
      auto e = Visit(sub, absl::StrCat(path, "/properties/", name), absl::StrCat(hint, "-", name),
                     depth + 1);
      if (!e.ok()) return e.status();
      keys.push_back(name);
      kvs.push_back(absl::StrCat(GbnfLiteral(json(name).dump()), " ws \":\" ws ", *e, " ws"));
    }
    std::string extra_kv;
    if (extra_value) {
      const std::string key = keys.empty() ? Shared("json-string") : ExcludedKeys(keys, hint);
      extra_kv =
          NewRule(hint + "-extra-kv", absl::StrCat(key, " ws \":\" ws ", *extra_value, " ws"));
    }
    // tail[i][e]: properties i.. given whether one was written before (e).
    const size_t n = kvs.size();
    std::vector<std::array<std::string, 2>> tail(n + 1);
    for (int e = 0; e < 2; ++e) {
      if (!extra_value) {
        tail[n][e] = "\"\"";
      } else {
        tail[n][e] = e ? absl::StrCat("(\",\" ws ", extra_kv, ")*")
                       : absl::StrCat("(", extra_kv, " (\",\" ws ", extra_kv, ")*)?");
      }
    }
    for (size_t i = n; i-- > 0;) {
      for (int e = 0; e < 2; ++e) {
        const std::string with = absl::StrCat(e ? "\",\" ws " : "", kvs[i], " ", tail[i + 1][1]);
        const std::string body =
            required.contains(keys[i]) ? with : absl::StrCat(with, " | ", tail[i + 1][e]);
        tail[i][e] = NewRule(absl::StrCat(hint, "-tail", i, e ? "-more" : ""), body);
      }
    }
    return NewRule(hint, absl::StrCat("\"{\" ws ", tail[0][0], " \"}\""));
  }

  /// A quoted key that is none of `keys` (written without escapes).
  std::string ExcludedKeys(const std::vector<std::string>& keys, const std::string& hint) {
    // A trie of the keys' code points; a rule per node: end here (unless a
    // key ends here), go on with a child, or leave the trie with another
    // character and finish freely.
    struct Node {
      std::map<uint32_t, int> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& k : keys) {
      // A key JSON escapes cannot be written without escapes: no clash.
      if (std::any_of(k.begin(), k.end(),
                      [](char c) { return c == '"' || c == '\\' || (c >= 0 && c < 0x20); })) {
        continue;
      }
      int at = 0;
      for (size_t i = 0; i < k.size();) {
        const unsigned char c = k[i];
        const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? c : (c & (0x3F >> (len - 1)));
        for (int j = 1; j < len && i + j < k.size(); ++j) cp = (cp << 6) | (k[i + j] & 0x3F);
        i += len;
        auto [it, added] = trie[at].children.emplace(cp, static_cast<int>(trie.size()));
        if (added) trie.emplace_back();
        at = it->second;
      }
      trie[at].terminal = true;
    }
    const std::string rest = NewRule(hint + "-key-rest", R"([^"\\\x00-\x1f]* "\"")");
    std::vector<std::string> names(trie.size());
    for (size_t i = 0; i < trie.size(); ++i)
      names[i] = NewRule(absl::StrCat(hint, "-key", i), "\"\"");
    for (size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("\"\\\"\"");
      std::string others = R"([^"\\\x00-\x1f)";
      for (const auto& [cp, child] : trie[i].children) {
        alts.push_back(absl::StrCat(absl::StrFormat("[\\U%08x]", cp), " ", names[child]));
        absl::StrAppend(&others, absl::StrFormat("\\U%08x", cp));
      }
      alts.push_back(absl::StrCat(others, "] ", rest));
      SetBody(names[i], absl::StrJoin(alts, " | "));
    }
    return NewRule(hint + "-key", absl::StrCat("\"\\\"\" ", names[0]));
  }

  absl::StatusOr<std::string> ArrayRule(const json& s, const std::string& path,
                                        const std::string& hint, int depth) {
    Shared("ws");
    auto min_r = Count(s, "minItems", path);
    if (!min_r.ok()) return min_r.status();
    auto max_r = Count(s, "maxItems", path);
    if (!max_r.ok()) return max_r.status();
    const int64_t min = min_r->value_or(0);
    const int64_t max = max_r->has_value() ? **max_r : -1;
    if (max >= 0 && max < min) return Error(path, "maxItems below minItems accepts nothing");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Error(path + "/prefixItems", "must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        auto e = Visit(s["prefixItems"][i], absl::StrCat(path, "/prefixItems/", i),
                       absl::StrCat(hint, "-", i), depth + 1);
        if (!e.ok()) return e.status();
        prefix.push_back(*e);
      }
    }
    std::optional<std::string> item;  // the rest; nullopt: no more items
    if (!s.contains("items") || s["items"] != json(false)) {
      if (s.contains("items") && s["items"].is_array()) {
        return Error(path + "/items",
                     "an array of schemas (draft 4 tuples) is not supported; use prefixItems");
      }
      auto e = s.contains("items") ? Visit(s["items"], path + "/items", hint + "-item", depth + 1)
                                   : absl::StatusOr<std::string>(Shared("json-value"));
      if (!e.ok()) return e.status();
      item = *e;
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    if (!item && min > k) return Error(path, "minItems more than prefixItems with items false");
    // The items after the prefix: count in [max(0, min-k), max-k].
    std::string rest = "\"\"";
    const int64_t rest_min = std::max<int64_t>(0, min - k);
    const int64_t rest_max = max < 0 ? -1 : max - k;
    if (item && (rest_max < 0 || rest_max > 0)) {
      const std::string one = absl::StrCat(*item, " ws");
      const std::string more = absl::StrCat("\",\" ws ", one);
      if (k > 0) {
        rest = Repeat(more, rest_min, rest_max);
      } else if (rest_min > 0) {
        rest = absl::StrCat(one, Repeat(more, rest_min - 1, rest_max < 0 ? -1 : rest_max - 1));
      } else {
        rest = absl::StrCat("(", one, Repeat(more, 0, rest_max < 0 ? -1 : rest_max - 1), ")?");
      }
    }
    // The prefix: element i is there when i < min, optional after (and
    // nothing follows a missing one).
    std::string body = NewRule(hint + "-rest", rest);
    const int64_t last = max < 0 ? k : std::min(k, max);
    for (int64_t i = last; i-- > 0;) {
      const std::string elem = absl::StrCat(i > 0 ? "\",\" ws " : "", prefix[i], " ws ", body);
      body = NewRule(absl::StrCat(hint, "-at", i), i < min ? elem : absl::StrCat("(", elem, ")?"));
    }
    return NewRule(hint, absl::StrCat("\"[\" ws ", body, " \"]\""));
  }

  const json& root_;
  JsonSchemaOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::set<std::string> shared_used_;
  std::map<std::string, std::string> ref_rules_;
  int nodes_ = 0;
};

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options) {
  const auto name_ok = [](const std::string& s, bool empty_ok) {
    return (empty_ok || !s.empty()) && std::all_of(s.begin(), s.end(), [](char c) {
             return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
           });
  };
  if (!name_ok(options.root_rule, false) || !name_ok(options.rule_prefix, true) ||
      options.root_rule.starts_with("json-") || options.root_rule == "ws") {
    return absl::InvalidArgumentError(
        "json_schema: root_rule / rule_prefix must be GBNF rule names, not json-* or ws");
  }
  return Converter(schema, options).Run();
}

absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_text,
                                             const JsonSchemaOptions& options) {
  json schema =
      json::parse(schema_text.begin(), schema_text.end(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return absl::InvalidArgumentError("json_schema: not valid JSON");
  return JsonSchemaToGbnf(schema, options);
}

std::string JsonObjectGbnf() { return JsonSchemaToGbnf(json{{"type", "object"}}).value(); }

}  // namespace odmoe
