// A context-free grammar over bytes, compiled from GBNF (llama.cpp's grammar
// format), which structured output (JSON Schema, json_object, a request's own
// `grammar`) is written in before it masks tokens (grammar_constraint.h).
//
//   ODMOE_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> g, ParseGbnf(R"(
//     root   ::= answer ("," ws answer)*      # comments run to the end of a line
//     answer ::= "yes" | "no" | [0-9]{1,3}
//     ws     ::= [ \t\n]*
//   )"));
//   GrammarMatcher m(g);                     // grammar_matcher.h
//   m.AcceptBytes("yes, 42");  m.Complete(); // -> true
//
// GBNF as accepted here: `name ::= alternatives`, one rule per definition (a
// rule continues on the next line after `::=`, after `|` and inside
// parentheses); names [a-zA-Z0-9_-]+; `|` alternation; `( ... )` grouping;
// literals "..." with the escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH
// \UHHHHHHHH; character classes [a-z0-9_] and negated [^"\\], with the same
// escapes; `.` (any character); repetition `*`, `+`, `?`, `{m}`, `{m,}`,
// `{m,n}`; `#` comments; the start rule is `root`. Literals and classes are
// Unicode code points matched as their UTF-8 bytes (a class becomes the byte
// sequences of its code points), so the matcher works on bytes only.
//
// Errors (INVALID_ARGUMENT) name the line and column: "grammar line 3 column
// 10: undefined rule 'value'", an unterminated literal, a bad escape, a
// repetition bound over kMaxRepetition, a duplicate rule, no `root`, and
// left recursion ("rule 'expr' is left-recursive", which includes a
// repetition of something that can match nothing, such as ("a"?)*). The text
// is at most kMaxGbnfBytes and the compiled grammar at most kMaxElements.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

/// Bounds on what ParseGbnf accepts (a request carries the text).
inline constexpr size_t kMaxGbnfBytes = 1 << 20;
inline constexpr int kMaxRepetition = 1000;      // m and n of x{m,n}
inline constexpr size_t kMaxElements = 1 << 20;  // after repetitions are expanded
inline constexpr int kMaxGbnfNesting = 100;      // parentheses inside each other

/// A token reference `<|call|>` in GBNF matches the vocabulary's control
/// token of that text (the token itself, never text spelling it): it is
/// compiled to kTokenMark + text + kTokenMark, the bytes the vocabulary trie
/// gives each control token (vocab_trie.h). 0xFF never occurs in UTF-8, so no
/// literal, class or `.` can match these bytes, and a control token can only
/// come where a grammar names it.
inline constexpr char kTokenMark = '\xFF';
/// The longest text of a token reference.
inline constexpr size_t kMaxTokenRefBytes = 256;

/// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

/// The compiled grammar: every rule's alternatives laid out in one array of
/// elements, each alternative ended by kEnd. A position (an index into
/// `elements`) is where a match stands inside an alternative.
struct Grammar {
  enum class Kind : uint8_t {
    kEnd,    // end of an alternative
    kBytes,  // one byte from byte_sets[value]
    kRule,   // rule `value`
  };
  struct Element {
    Kind kind;
    uint32_t value;
  };
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  /// rule -> start positions of its alternatives (an empty alternative
  /// starts at its kEnd).
  std::vector<std::vector<uint32_t>> rule_alternatives;
  /// rule -> name; rules made for groups and repetitions are named after the
  /// rule they occur in ("value-3").
  std::vector<std::string> rule_names;
  uint32_t root = 0;
  /// A hash of everything above: equal grammars (the same text) have equal
  /// fingerprints, and shared caches key on it (mask_cache.h).
  uint64_t fingerprint = 0;
};

/// Parses and compiles GBNF text (see the top of this file).
absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text);

/// ParseGbnf, remembered: the grammars of the last kCachedGrammars texts
/// parsed this way are kept (by their text), so a request's grammar is parsed
/// once for its check (PreparePrompt) and its use (Sequence), and an app that
/// sends the same schema again does not pay for it again. Errors are not kept.
/// Thread-safe.
inline constexpr size_t kCachedGrammars = 16;
absl::StatusOr<std::shared_ptr<const Grammar>> ParseGbnfCached(std::string_view text);

}  // namespace odmoe
