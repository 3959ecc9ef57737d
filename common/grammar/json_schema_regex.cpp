#include "grammar/json_schema_regex.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

using Ranges = std::vector<CodePointRange>;

/// One character as JSON writes it inside a string, as a GBNF literal.
std::string JsonChar(uint32_t cp) {
  switch (cp) {
    case '"':
      return R"("\\\"")";
    case '\\':
      return R"("\\\\")";
    case '\n':
      return R"("\\n")";
    case '\r':
      return R"("\\r")";
    case '\t':
      return R"("\\t")";
    case '\b':
      return R"("\\b")";
    case '\f':
      return R"("\\f")";
    default:
      break;
  }
  if (cp < 0x20) return absl::StrFormat(R"("\\u%04x")", cp);
  return absl::StrFormat(R"("\U%08x")", cp);
}

/// A set of code points as GBNF: a class of the characters JSON writes as
/// themselves, alternatives for the ones it escapes.
std::string SetExpr(const Ranges& ranges) {
  std::vector<std::string> alts;
  std::string cls;
  for (auto [lo, hi] : ranges) {
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x1f); ++c) alts.push_back(JsonChar(c));
    if (lo <= '"' && '"' <= hi) alts.push_back(JsonChar('"'));
    if (lo <= '\\' && '\\' <= hi) alts.push_back(JsonChar('\\'));
    // The rest of [lo, hi] without 0..1f, '"', '\\'.
    uint32_t a = std::max<uint32_t>(lo, 0x20);
    for (const uint32_t cut : {uint32_t{'"'}, uint32_t{'\\'}}) {
      if (a <= cut && cut <= hi) {
        if (a < cut) absl::StrAppend(&cls, absl::StrFormat("\\U%08x-\\U%08x", a, cut - 1));
        a = cut + 1;
      }
    }
    if (a <= hi) absl::StrAppend(&cls, absl::StrFormat("\\U%08x-\\U%08x", a, hi));
  }
  if (!cls.empty()) alts.insert(alts.begin(), absl::StrCat("[", cls, "]"));
  if (alts.empty()) return "";
  return alts.size() == 1 ? alts[0] : absl::StrCat("(", absl::StrJoin(alts, " | "), ")");
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  absl::StatusOr<std::string> Parse() {
    bool start = false, end = false;
    if (!p_.empty() && p_[0] == '^') start = true, ++i_;
    if (p_.size() > i_ && p_.back() == '$' && !Escaped(p_.size() - 1)) {
      end = true;
      p_.remove_suffix(1);
    }
    auto body = Alternatives(0);
    if (!body.ok()) return body.status();
    if (i_ < p_.size()) return Error("unbalanced ')'");
    if ((start || end) && top_level_bar_)
      return Error("anchors with a top-level '|' (put the alternatives in a group)");
    return absl::StrCat(start ? "" : "json-char* ", "(", *body, ")", end ? "" : " json-char*");
  }

 private:
  bool Escaped(size_t at) const {
    size_t n = 0;
    while (at > n && p_[at - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("pattern at ", i_, ": ", what));
  }
  bool More() const { return i_ < p_.size(); }

  absl::StatusOr<std::string> Alternatives(int depth) {
    if (depth > kMaxGbnfNesting) return Error("groups nested too deep");
    std::vector<std::string> alts;
    for (;;) {
      auto seq = Sequence(depth);
      if (!seq.ok()) return seq.status();
      alts.push_back(*seq);
      if (!More() || p_[i_] != '|') break;
      if (depth == 0) top_level_bar_ = true;
      ++i_;
    }
    return absl::StrJoin(alts, " | ");
  }

  absl::StatusOr<std::string> Sequence(int depth) {
    std::vector<std::string> parts;
    while (More() && p_[i_] != '|' && p_[i_] != ')') {
      auto atom = Atom(depth);
      if (!atom.ok()) return atom.status();
      auto q = Quantified(*atom);
      if (!q.ok()) return q.status();
      parts.push_back(*q);
    }
    return parts.empty() ? std::string("\"\"") : absl::StrJoin(parts, " ");
  }

  absl::StatusOr<std::string> Quantified(const std::string& atom) {
    if (!More()) return atom;
    std::string q;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) return Error("unterminated {");
      const std::string_view inside = p_.substr(i_ + 1, close - i_ - 1);
      int m = 0, n = -1;
      const size_t comma = inside.find(',');
      auto number = [&](std::string_view s, int* out) {
        if (s.empty() || s.size() > 4) return false;
        *out = 0;
        for (const char d : s) {
          if (d < '0' || d > '9') return false;
          *out = *out * 10 + (d - '0');
        }
        return true;
      };
      if (comma == std::string_view::npos) {
        if (!number(inside, &m)) return Error("bad repetition count");
        n = m;
      } else {
        if (!number(inside.substr(0, comma), &m)) return Error("bad repetition count");
        if (comma + 1 < inside.size() && !number(inside.substr(comma + 1), &n))
          return Error("bad repetition count");
      }
      if (m > kMaxRepetition || n > kMaxRepetition) return Error("repetition count over 1000");
      if (n >= 0 && n < m) return Error("repetition {m,n} with n < m");
      q = n < 0 ? absl::StrCat("{", m, ",}") : absl::StrCat("{", m, ",", n, "}");
      i_ = close + 1;
    } else {
      return atom;
    }
    if (More() && p_[i_] == '?') ++i_;  // lazy: the same strings
    if (More() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '{'))
      return Error("a repetition of a repetition");
    return absl::StrCat("(", atom, ")", q);
  }

  absl::StatusOr<uint32_t> Char() {
    const Utf8Scan s = ScanUtf8(p_, i_);
    if (s.state != Utf8State::kValid) return Error("invalid UTF-8");
    i_ += s.length;
    return static_cast<uint32_t>(s.codepoint);
  }
  absl::StatusOr<uint32_t> Hex(int n) {
    if (i_ + n > p_.size()) return Error("short hex escape");
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = p_[i_++];
      const int d = (c >= '0' && c <= '9')   ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
      if (d < 0) return Error("bad hex escape");
      v = v * 16 + d;
    }
    return v;
  }

  /// After a backslash: a class escape (into *ranges, true) or one character.
  absl::StatusOr<bool> Escape(Ranges* ranges, uint32_t* cp) {
    if (!More()) return Error("trailing backslash");
    const char e = p_[i_++];
    static const Ranges kDigit = {{'0', '9'}};
    static const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};
    struct ClassEscape {
      char letter;
      const Ranges* ranges;
      bool negate;
    };
    static const ClassEscape kClasses[] = {{'d', &kDigit, false}, {'D', &kDigit, true},
                                           {'w', &kWord, false},  {'W', &kWord, true},
                                           {'s', &kSpace, false}, {'S', &kSpace, true}};
    for (const ClassEscape& c : kClasses) {
      if (c.letter != e) continue;
      const Ranges r = c.negate ? ComplementCodePoints(*c.ranges) : *c.ranges;
      ranges->insert(ranges->end(), r.begin(), r.end());
      return true;
    }
    static constexpr std::pair<char, uint32_t> kChars[] = {{'n', '\n'}, {'r', '\r'}, {'t', '\t'},
                                                           {'f', '\f'}, {'v', '\v'}, {'0', 0}};
    for (const auto& [letter, value] : kChars) {
      if (letter != e) continue;
      *cp = value;
      return false;
    }
    if (e == 'u' || e == 'x') {
      auto v = Hex(e == 'u' ? 4 : 2);
      if (!v.ok()) return v.status();
      *cp = *v;
      return false;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
      return Error(absl::StrCat("unsupported escape \\", std::string(1, e)));
    }
    *cp = static_cast<unsigned char>(e);
    return false;
  }

  absl::StatusOr<std::string> Atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (More() && p_[i_] == '?') {
        return Error("lookaround and named groups are not supported");
      }
      auto inner = Alternatives(depth + 1);
      if (!inner.ok()) return inner.status();
      if (!More() || p_[i_] != ')') return Error("missing ')'");
      ++i_;
      return absl::StrCat("(", *inner, ")");
    }
    if (c == '[') return Class();
    if (c == '.') {
      ++i_;
      return SetExpr(ComplementCodePoints({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '^' || c == '$') return Error("an anchor inside the pattern is not supported");
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("nothing to repeat");
    if (c == '\\') {
      ++i_;
      Ranges ranges;
      uint32_t cp = 0;
      auto cls = Escape(&ranges, &cp);
      if (!cls.ok()) return cls.status();
      return *cls ? SetExpr(ranges) : JsonChar(cp);
    }
    auto cp = Char();
    if (!cp.ok()) return cp.status();
    return JsonChar(*cp);
  }

  absl::StatusOr<std::string> Class() {
    ++i_;  // [
    bool negate = false;
    if (More() && p_[i_] == '^') negate = true, ++i_;
    Ranges ranges;
    bool first = true;
    while (More() && (p_[i_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        auto cls = Escape(&ranges, &lo);
        if (!cls.ok()) return cls.status();
        if (*cls) continue;
      } else {
        auto cp = Char();
        if (!cp.ok()) return cp.status();
        lo = *cp;
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          ++i_;
          Ranges unused;
          auto cls = Escape(&unused, &hi);
          if (!cls.ok()) return cls.status();
          if (*cls) return Error("a class escape cannot end a range");
        } else {
          auto cp = Char();
          if (!cp.ok()) return cp.status();
          hi = *cp;
        }
        if (hi < lo) return Error("range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    if (!More()) return Error("unterminated class");
    ++i_;  // ]
    if (negate) ranges = ComplementCodePoints(ranges);
    const std::string e = SetExpr(ranges);
    if (e.empty()) return Error("empty class");
    return e;
  }

  std::string_view p_;
  size_t i_ = 0;
  bool top_level_bar_ = false;
};

}  // namespace

absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern) {
  if (pattern.size() > 4096) return absl::InvalidArgumentError("pattern longer than 4096 bytes");
  return RegexParser(pattern).Parse();
}

}  // namespace odmoe
