// ParseGbnf: recursive descent over the text into rules of symbols, then
// repetitions expanded into helper rules, the whole checked (undefined rules,
// left recursion) and laid out flat (grammar.h).
#include <algorithm>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"
#include "tokenizer/utf8.h"

namespace odmoe {
namespace {

using Kind = Grammar::Kind;

struct Symbol {
  Kind kind;  // kBytes or kRule
  uint32_t value;
};
using Sequence = std::vector<Symbol>;

struct RuleDraft {
  std::string name;
  std::vector<Sequence> alternatives;
  bool defined = false;
  int line = 0, column = 0;  // where defined (or first referenced, while undefined)
  uint32_t origin = 0;       // the named rule a helper rule was made for
  std::string body;          // the definition's text (named rules)
};

/// FNV-1a over the compiled grammar's arrays.
uint64_t Fingerprint(const Grammar& g) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const Grammar::Element& e : g.elements) {
    mix(&e.kind, sizeof(e.kind));
    mix(&e.value, sizeof(e.value));
  }
  for (const ByteSet& b : g.byte_sets) mix(b.bits.data(), sizeof(b.bits));
  for (const auto& alts : g.rule_alternatives) {
    const uint64_t n = alts.size();
    mix(&n, sizeof(n));
    mix(alts.data(), alts.size() * sizeof(uint32_t));
  }
  mix(&g.root, sizeof(g.root));
  return h;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Parse() {
    if (text_.size() > kMaxGbnfBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grammar: ", text_.size(), " bytes, more than the ", kMaxGbnfBytes, " allowed"));
    }
    for (;;) {
      SkipSpace(/*newline_ok=*/true);
      if (AtEnd()) break;
      if (absl::Status s = ParseRule(); !s.ok()) return s;
    }
    return Finish();
  }

 private:
  // ---- text ----
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void Advance() {
    if (Peek() == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }
  int Column() const { return static_cast<int>(pos_ - line_start_) + 1; }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar line ", line_, " column ", Column(), ": ", what));
  }
  static bool IsNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newline_ok && c == '\n')) {
        Advance();
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n') Advance();
      } else {
        break;
      }
    }
  }
  std::string ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) Advance();
    return std::string(text_.substr(start, pos_ - start));
  }

  // ---- rules ----
  /// The id of rule `name`, made on first mention (at line:column).
  uint32_t RuleId(const std::string& name, int line, int column) {
    const auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.push_back(RuleDraft{.name = name,
                               .alternatives = {},
                               .line = line,
                               .column = column,
                               .origin = id,
                               .body = {}});
    ids_.emplace(name, id);
    return id;
  }
  uint32_t NewHelperRule() {
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.push_back(RuleDraft{.name = absl::StrCat(rules_[current_].name, "-", ++helper_count_),
                               .alternatives = {},
                               .defined = true,
                               .line = line_,
                               .column = Column(),
                               .origin = current_,
                               .body = {}});
    return id;
  }
  absl::Status Count(size_t n) {
    elements_ += n;
    if (elements_ > kMaxElements) {
      return Error(absl::StrCat("the grammar grows past ", kMaxElements, " elements"));
    }
    return absl::OkStatus();
  }
  uint32_t ByteSetId(const ByteSet& set) {
    const auto [it, added] =
        byte_set_ids_.emplace(set.bits, static_cast<uint32_t>(byte_sets_.size()));
    if (added) byte_sets_.push_back(set);
    return it->second;
  }

  /// One rule. A rule defined again with the same text is allowed (grammars
  /// joined from several JsonSchemaToGbnf calls repeat the shared rules);
  /// with another text it is an error.
  absl::Status ParseRule() {
    const int line = line_, column = Column();
    const std::string name = ParseName();
    if (name.empty())
      return Error(absl::StrCat("expected a rule name, found '", std::string(1, Peek()), "'"));
    const int name_end_line = line_, name_end_column = Column();
    const uint32_t id = RuleId(name, line, column);
    const bool again = rules_[id].defined;
    if (!again) {
      rules_[id].defined = true;
      rules_[id].line = line;
      rules_[id].column = column;
    }
    current_ = id;
    helper_count_ = again ? helper_count_ : 0;
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=")
      return Error(absl::StrCat("expected '::=' after rule name '", name, "'"));
    for (int i = 0; i < 3; ++i) Advance();
    SkipSpace(true);
    const size_t body_start = pos_;
    auto alts = ParseAlternatives(/*nested=*/false, 0);
    if (!alts.ok()) return alts.status();
    std::string_view body = text_.substr(body_start, pos_ - body_start);
    while (!body.empty() && (body.back() == ' ' || body.back() == '\t' || body.back() == '\r')) {
      body.remove_suffix(1);
    }
    if (again) {
      if (body != rules_[id].body) {
        return absl::InvalidArgumentError(
            absl::StrCat("grammar line ", name_end_line, " column ", name_end_column, ": rule '",
                         name, "' defined twice (first at line ", rules_[id].line, ")"));
      }
    } else {
      rules_[id].alternatives = std::move(alts).value();
      rules_[id].body = std::string(body);
    }
    SkipSpace(false);
    if (!AtEnd() && Peek() != '\n')
      return Error(absl::StrCat("unexpected '", std::string(1, Peek()), "'"));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Sequence>> ParseAlternatives(bool nested, int depth) {
    std::vector<Sequence> alts;
    for (;;) {
      auto seq = ParseSequence(nested, depth);
      if (!seq.ok()) return seq.status();
      alts.push_back(std::move(seq).value());
      if (absl::Status s = Count(alts.back().size() + 1); !s.ok()) return s;
      if (Peek() != '|') break;
      Advance();
      SkipSpace(true);
    }
    return alts;
  }

  absl::StatusOr<Sequence> ParseSequence(bool nested, int depth) {
    Sequence seq;
    for (;;) {
      SkipSpace(nested);
      const char c = Peek();
      if (AtEnd() || c == '|' || c == ')' || c == '\n') break;
      Sequence atom;
      if (c == '"') {
        auto s = ParseLiteral(&atom);
        if (!s.ok()) return s;
      } else if (c == '[') {
        auto s = ParseClass(&atom);
        if (!s.ok()) return s;
      } else if (c == '<') {
        auto s = ParseTokenRef(&atom);
        if (!s.ok()) return s;
      } else if (c == '.') {
        Advance();
        atom.push_back(ClassSymbol({{0, kMaxCodePoint}}));
      } else if (c == '(') {
        if (depth >= kMaxGbnfNesting) return Error("parentheses nested too deep");
        Advance();
        SkipSpace(true);
        auto alts = ParseAlternatives(/*nested=*/true, depth + 1);
        if (!alts.ok()) return alts.status();
        SkipSpace(true);
        if (Peek() != ')') return Error("expected ')'");
        Advance();
        const uint32_t group = NewHelperRule();
        rules_[group].alternatives = std::move(alts).value();
        atom.push_back({Kind::kRule, group});
      } else if (IsNameChar(c)) {
        const int line = line_, column = Column();
        const std::string name = ParseName();
        atom.push_back({Kind::kRule, RuleId(name, line, column)});
      } else {
        return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
      }
      SkipSpace(nested);
      if (absl::Status s = ParsePostfix(&atom); !s.ok()) return s;
      if (absl::Status s = Count(atom.size()); !s.ok()) return s;
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
    return seq;
  }

  // ---- terminals ----
  absl::StatusOr<uint32_t> ParseHex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = Peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return Error(absl::StrCat("expected ", digits, " hex digits"));
      v = v * 16 + d;
      Advance();
    }
    return v;
  }
  /// One character of a literal or class (an escape or a UTF-8 sequence).
  absl::StatusOr<uint32_t> ParseChar() {
    if (AtEnd()) return Error("unexpected end of grammar");
    if (Peek() == '\\') {
      Advance();
      const char e = Peek();
      Advance();
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
          return static_cast<uint32_t>(e);
        case 'x':
          return ParseHex(2);
        case 'u':
          return ParseHex(4);
        case 'U':
          return ParseHex(8);
        default:
          return Error(absl::StrCat("unknown escape '\\", std::string(1, e), "'"));
      }
    }
    const Utf8Scan cp = ScanUtf8(text_, pos_);
    if (cp.state != Utf8State::kValid) return Error("invalid UTF-8");
    for (size_t i = 0; i < cp.length; ++i) Advance();
    return static_cast<uint32_t>(cp.codepoint);
  }
  // <text>: the control token of that text, as kTokenMark + text + kTokenMark.
  absl::Status ParseTokenRef(Sequence* out) {
    std::string bytes(1, kTokenMark);
    while (true) {
      if (AtEnd() || Peek() == '\n' || Peek() == ' ' || Peek() == '\t' || Peek() == '"') {
        return Error("unterminated token reference (expected '>')");
      }
      const char c = Peek();
      Advance();
      bytes += c;
      if (c == '>') break;
      if (bytes.size() > kMaxTokenRefBytes) return Error("token reference too long");
    }
    bytes += kTokenMark;
    for (const char b : bytes) {
      ByteSet set;
      set.Add(static_cast<uint8_t>(b));
      out->push_back({Kind::kBytes, ByteSetId(set)});
    }
    return absl::OkStatus();
  }
  absl::Status ParseLiteral(Sequence* out) {
    Advance();  // "
    while (Peek() != '"') {
      if (AtEnd() || Peek() == '\n') return Error("unterminated literal");
      auto c = ParseChar();
      if (!c.ok()) return c.status();
      if (*c > kMaxCodePoint || (*c >= 0xD800 && *c <= 0xDFFF)) {
        return Error("escape is not a Unicode scalar value");
      }
      std::string bytes;
      AppendUtf8(static_cast<char32_t>(*c), &bytes);
      for (const char b : bytes) {
        ByteSet set;
        set.Add(static_cast<uint8_t>(b));
        out->push_back({Kind::kBytes, ByteSetId(set)});
      }
    }
    Advance();
    return absl::OkStatus();
  }
  absl::Status ParseClass(Sequence* out) {
    Advance();  // [
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      Advance();
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (Peek() != ']') {
      if (AtEnd() || Peek() == '\n') return Error("unterminated character class");
      auto lo = ParseChar();
      if (!lo.ok()) return lo.status();
      uint32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != '\n' && Peek(1) != '\0') {
        Advance();
        auto h = ParseChar();
        if (!h.ok()) return h.status();
        hi = *h;
        if (hi < *lo) return Error("character range out of order");
      }
      if (hi > kMaxCodePoint) return Error("code point out of range");
      ranges.emplace_back(*lo, hi);
    }
    Advance();
    if (negated) ranges = ComplementCodePoints(ranges);
    if (ranges.empty()) return Error("empty character class");
    out->push_back(ClassSymbol(ranges));
    return absl::OkStatus();
  }
  /// A symbol matching one code point from `ranges` as UTF-8: one byte set
  /// when every code point is ASCII, else a helper rule of byte sequences.
  Symbol ClassSymbol(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    const std::vector<Utf8Sequence> seqs = Utf8SequencesOf(ranges);
    ByteSet single;
    bool any_single = false;
    std::vector<Sequence> alts;
    for (const Utf8Sequence& s : seqs) {
      if (s.size() == 1) {
        single.AddRange(s[0].first, s[0].second);
        any_single = true;
        continue;
      }
      Sequence alt;
      for (const auto& [lo, hi] : s) {
        ByteSet set;
        set.AddRange(lo, hi);
        alt.push_back({Kind::kBytes, ByteSetId(set)});
      }
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return {Kind::kBytes, ByteSetId(single)};
    if (any_single) alts.insert(alts.begin(), Sequence{{Kind::kBytes, ByteSetId(single)}});
    const uint32_t id = NewHelperRule();
    rules_[id].alternatives = std::move(alts);
    return {Kind::kRule, id};
  }

  // ---- repetition ----
  absl::StatusOr<int> ParseInt() {
    if (!(Peek() >= '0' && Peek() <= '9')) return Error("expected a number");
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepetition) return Error(absl::StrCat("repetition count over ", kMaxRepetition));
      Advance();
    }
    return static_cast<int>(v);
  }
  absl::Status ParsePostfix(Sequence* atom) {
    int min = 1, max = 1;  // max -1 = unbounded
    const char c = Peek();
    if (c == '*') {
      min = 0, max = -1;
    } else if (c == '+') {
      min = 1, max = -1;
    } else if (c == '?') {
      min = 0, max = 1;
    } else if (c == '{') {
      Advance();
      SkipSpace(false);
      auto m = ParseInt();
      if (!m.ok()) return m.status();
      min = max = *m;
      SkipSpace(false);
      if (Peek() == ',') {
        Advance();
        SkipSpace(false);
        max = -1;
        if (Peek() != '}') {
          auto n = ParseInt();
          if (!n.ok()) return n.status();
          max = *n;
          if (max < min) return Error("repetition {m,n} with n < m");
        }
        SkipSpace(false);
      }
      if (Peek() != '}') return Error("expected '}'");
    } else {
      return absl::OkStatus();
    }
    Advance();
    SkipSpace(false);
    return Repeat(atom, min, max);
  }
  /// atom{min,max} as min copies, then a rule for the rest: R ::= atom R | ""
  /// (unbounded) or nested optionals R1 ::= atom R2 | "" ... (bounded).
  absl::Status Repeat(Sequence* atom, int min, int max) {
    const Sequence one = *atom;
    Sequence out;
    for (int i = 0; i < min; ++i) {
      if (absl::Status s = Count(one.size()); !s.ok()) return s;
      out.insert(out.end(), one.begin(), one.end());
    }
    if (max < 0) {
      const uint32_t r = NewHelperRule();
      Sequence loop = one;
      loop.push_back({Kind::kRule, r});
      rules_[r].alternatives = {loop, {}};
      if (absl::Status s = Count(loop.size() + 2); !s.ok()) return s;
      out.push_back({Kind::kRule, r});
    } else if (max > min) {
      std::optional<uint32_t> next;
      for (int i = max - min; i > 0; --i) {
        const uint32_t r = NewHelperRule();
        Sequence alt = one;
        if (next) alt.push_back({Kind::kRule, *next});
        rules_[r].alternatives = {alt, {}};
        if (absl::Status s = Count(alt.size() + 2); !s.ok()) return s;
        next = r;
      }
      out.push_back({Kind::kRule, *next});
    }
    *atom = std::move(out);
    return absl::OkStatus();
  }

  // ---- checks and layout ----
  absl::Status RuleError(uint32_t id, const std::string& what) const {
    const RuleDraft& r = rules_[rules_[id].origin];
    return absl::InvalidArgumentError(
        absl::StrCat("grammar line ", r.line, " column ", r.column, ": ", what));
  }
  absl::Status CheckLeftRecursion() const {
    const size_t n = rules_.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Sequence& alt : rules_[r].alternatives) {
          if (std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
                return s.kind == Kind::kRule && nullable[s.value];
              })) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Edges r -> s where s can start r's match; a cycle is left recursion.
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (const Sequence& alt : rules_[r].alternatives) {
        for (const Symbol& s : alt) {
          if (s.kind != Kind::kRule) break;
          left[r].push_back(s.value);
          if (!nullable[s.value]) break;
        }
      }
    }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    for (uint32_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{start, 0}};  // iterative DFS
      color[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == left[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t s = left[r][next++];
        if (color[s] == 1) {
          return RuleError(s, absl::StrCat("rule '", rules_[rules_[s].origin].name,
                                           "' is left-recursive (it can reach itself without "
                                           "consuming input; a repetition of something that can "
                                           "match nothing counts too)"));
        }
        if (color[s] == 0) {
          color[s] = 1;
          path.emplace_back(s, 0);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<const Grammar>> Finish() {
    for (const RuleDraft& r : rules_) {
      if (!r.defined) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar line ", r.line, " column ", r.column, ": undefined rule '", r.name, "'"));
      }
    }
    const auto root = ids_.find("root");
    if (root == ids_.end()) return absl::InvalidArgumentError("grammar: no 'root' rule");
    if (absl::Status s = CheckLeftRecursion(); !s.ok()) return s;
    auto g = std::make_shared<Grammar>();
    g->root = root->second;
    g->byte_sets = std::move(byte_sets_);
    g->elements.reserve(elements_);
    for (const RuleDraft& r : rules_) {
      g->rule_names.push_back(r.name);
      std::vector<uint32_t>& starts = g->rule_alternatives.emplace_back();
      for (const Sequence& alt : r.alternatives) {
        starts.push_back(static_cast<uint32_t>(g->elements.size()));
        for (const Symbol& s : alt) g->elements.push_back({s.kind, s.value});
        g->elements.push_back({Kind::kEnd, 0});
      }
    }
    g->fingerprint = Fingerprint(*g);
    return std::shared_ptr<const Grammar>(std::move(g));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  std::vector<RuleDraft> rules_;
  std::map<std::string, uint32_t> ids_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_ids_;
  uint32_t current_ = 0;
  int helper_count_ = 0;
  size_t elements_ = 0;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text) {
  return GbnfParser(text).Parse();
}

}  // namespace odmoe
