// GBNF parsing and byte matching (grammar/grammar.h, grammar/grammar_matcher.h):
// what each construct accepts, the errors with their line and column, and
// the bounds that keep hostile grammars cheap.
#include <catch2/catch.hpp>
#include <random>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar_test_util.h"

namespace odmoe {
namespace {

using test::MatchesAll;

std::shared_ptr<const Grammar> Compile(const std::string& text) { return test::CompileGbnf(text); }
bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  return MatchesAll(g, s);
}

std::string ErrorOf(const std::string& text) {
  auto g = ParseGbnf(text);
  REQUIRE(!g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST_CASE("GBNF constructs match what they say", "[grammar]") {
  const auto g = Compile(R"(
# a comment line
root ::= greeting (", " name)? "!"{1,3}   # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]* | "\u00e9t\u00e9"
)");
  CHECK(Matches(g, "hi!"));
  CHECK(Matches(g, "hello, Bob!!!"));
  CHECK(Matches(g, "hi, \xc3\xa9t\xc3\xa9!"));
  CHECK_FALSE(Matches(g, "hi"));
  CHECK_FALSE(Matches(g, "hi!!!!"));
  CHECK_FALSE(Matches(g, "hello, bob!"));
  CHECK_FALSE(Matches(g, "hey!"));
}

TEST_CASE("GBNF negated classes and dot match whole UTF-8 characters", "[grammar]") {
  const auto g = Compile(R"(root ::= "\"" [^"\\]* "\"" .)");
  CHECK(Matches(g, "\"ab\xe2\x82\xac\xf0\x9f\x98\x80\"x"));
  CHECK(Matches(g, "\"\"\xf0\x9f\x98\x80"));
  CHECK_FALSE(Matches(g, "\"a\\\"x"));
  CHECK_FALSE(Matches(g, "\"\xe2\x82\"x"));      // a truncated character
  CHECK_FALSE(Matches(g, "\"\xed\xa0\x80\"x"));  // a surrogate is not UTF-8
  CHECK_FALSE(Matches(g, "\"a\"\xc0\xaf"));      // overlong
  const auto emoji = Compile(R"(root ::= [\U0001F600-\U0001F64F]+)");
  CHECK(Matches(emoji, "\xf0\x9f\x98\x80\xf0\x9f\x99\x8f"));
  CHECK_FALSE(Matches(emoji, "\xf0\x9f\x99\x90"));
}

TEST_CASE("GBNF repetition bounds are exact", "[grammar]") {
  const auto g = Compile(R"(root ::= "a"{2,4} "b"{3} "c"{2,} "d"?)");
  for (int a = 0; a < 6; ++a) {
    for (int c = 0; c < 5; ++c) {
      const std::string s = std::string(a, 'a') + "bbb" + std::string(c, 'c');
      INFO(s);
      CHECK(Matches(g, s) == (a >= 2 && a <= 4 && c >= 2));
    }
  }
}

TEST_CASE("GBNF rules continue after ::=, after | and inside parentheses", "[grammar]") {
  const auto g =
      Compile("root ::=\n  item (\n    \",\" item  # more\n  )*\nitem ::= \"x\" |\n  \"y\"\n");
  CHECK(Matches(g, "x,y,x"));
  CHECK_FALSE(Matches(g, "x,"));
}

TEST_CASE("GBNF errors name the line and column", "[grammar]") {
  CHECK(ErrorOf("root ::= value\n\nother ::= \"x\" value2\n") ==
        "grammar line 1 column 10: undefined rule 'value'");
  CHECK(ErrorOf("root ::= \"a\"\nx ::= \"b\n") == "grammar line 2 column 9: unterminated literal");
  CHECK(ErrorOf("root ::= [a-\n") == "grammar line 1 column 13: unterminated character class");
  CHECK(ErrorOf("root ::= \"\\q\"") == "grammar line 1 column 13: unknown escape '\\q'");
  CHECK(ErrorOf("root ::= \"a\"{1001}") == "grammar line 1 column 17: repetition count over 1000");
  CHECK(ErrorOf("root ::= \"a\"{3,2}") == "grammar line 1 column 17: repetition {m,n} with n < m");
  CHECK(ErrorOf("root ::= \"a\"\nroot ::= \"b\"") ==
        "grammar line 2 column 5: rule 'root' defined twice (first at line 1)");
  CHECK(ErrorOf("other ::= \"a\"") == "grammar: no 'root' rule");
  // The same definition twice is fine (joined grammars repeat shared rules).
  CHECK(Matches(Compile("root ::= x x\nx ::= [a-c] (\"-\")?\nx ::= [a-c] (\"-\")?   \n"), "a-b"));
  CHECK(ErrorOf("root ::= (\"a\"") == "grammar line 1 column 14: expected ')'");
  CHECK(ErrorOf("root ::= \"a\" ) ") == "grammar line 1 column 14: unexpected ')'");
  CHECK(ErrorOf("root = \"a\"") ==
        "grammar line 1 column 6: expected '::=' after rule name 'root'");
  CHECK(ErrorOf("root ::= [z-a]") == "grammar line 1 column 14: character range out of order");
}

TEST_CASE("GBNF left recursion is an error", "[grammar]") {
  CHECK(ErrorOf("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]") ==
        "grammar line 2 column 1: rule 'expr' is left-recursive (it can reach itself without "
        "consuming input; "
        "a repetition of something that can match nothing counts too)");
  CHECK_THAT(ErrorOf("root ::= a\na ::= b? a \"x\"\nb ::= \"y\""),
             Catch::Contains("rule 'a' is left-recursive"));
  CHECK_THAT(ErrorOf("root ::= (\"a\"?)*"), Catch::Contains("rule 'root' is left-recursive"));
  // Right recursion is fine.
  const auto g = Compile("root ::= \"(\" root \")\" | \"x\"");
  CHECK(Matches(g, "((x))"));
  CHECK_FALSE(Matches(g, "((x)"));
}

TEST_CASE("GBNF bounds: size, nesting, expansion", "[grammar]") {
  CHECK_THAT(ErrorOf(std::string(kMaxGbnfBytes + 1, ' ')), Catch::Contains("more than the"));
  CHECK_THAT(ErrorOf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')),
             Catch::Contains("parentheses nested too deep"));
  // Nested large repetitions stay within kMaxElements or fail cleanly.
  CHECK_THAT(ErrorOf("root ::= \"" + std::string(2000, 'a') + "\"{1000}"),
             Catch::Contains("elements"));
}

TEST_CASE("GBNF parser survives random input", "[grammar]") {
  std::mt19937 rng(34);
  const std::string alphabet = "root::= \"[]()|*+?{},-^\\x0a#\n";
  for (int i = 0; i < 3000; ++i) {
    std::string text = i % 2 ? "root ::= " : "";
    const int n = rng() % 40;
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    auto g = ParseGbnf(text);
    if (g.ok()) {
      GrammarMatcher m(*g);
      m.AcceptBytes("ab(c)");
    }
  }
  SUCCEED();
}

TEST_CASE("matcher state does not grow with the text (nesting is bounded)", "[grammar]") {
  const auto g = Compile(R"(root ::= "[" (root ("," root)*)? "]" | [a-z]+)");
  GrammarMatcher m(g);
  for (int i = 0; i < 1000; ++i) REQUIRE(m.AcceptBytes("abcdefgh"[i % 8] == 'a' ? "a" : "b"));
  const size_t states = m.state_count();
  for (int i = 0; i < 100000; ++i) REQUIRE(m.AcceptBytes("b"));
  CHECK(m.state_count() == states);  // one state for the whole word
  // Nesting deeper than the stack bound is refused, not a crash or a hang.
  GrammarMatcher deep(g);
  size_t accepted = 0;
  while (accepted < 10000 && deep.AcceptBytes("[")) ++accepted;
  CHECK(accepted < 10000);
  CHECK(accepted >= 500);
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("the state table is trimmed past its bound and matching goes on", "[grammar]") {
  std::string gbnf = "root ::= [0-9]{0,1000}";
  for (int i = 0; i < 19; ++i) gbnf += " \".\" [0-9]{0,1000}";
  const auto g = test::CompileGbnf(gbnf);
  GrammarMatcher m(g);
  const std::string block(1000, '7');
  for (int i = 0; i < 20; ++i) {
    if (i > 0) REQUIRE(m.AcceptBytes("."));
    for (const char c : block) REQUIRE(m.AcceptBytes(std::string(1, c)));
  }
  CHECK(m.Complete());
  CHECK(m.generation() >= 1);  // 20,000 states seen, at most kMaxStates kept
  CHECK(m.state_count() <= GrammarMatcher::kMaxStates + 1);
  CHECK_FALSE(m.AcceptBytes("7"));
}

}  // namespace
}  // namespace odmoe
