// Helpers of the grammar tests: a grammar compiled or the test fails, a whole
// match, a tokenizer from a GGUF file of the repository.
//
//   auto g = test::CompileGbnf(R"(root ::= "a"+)");
//   CHECK(test::MatchesAll(g, "aaa"));
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "gguf/gguf_reader.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::test {

inline std::shared_ptr<const Grammar> CompileGbnf(const std::string& gbnf) {
  auto g = ParseGbnf(gbnf);
  INFO(gbnf << "\n-> " << g.status());
  REQUIRE(g.ok());
  return *g;
}

/// Whether the whole of `text` is a match of `g`.
inline bool MatchesAll(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.Complete();
}

inline std::unique_ptr<Tokenizer> TokenizerOf(const std::string& relative_gguf) {
  auto file = GgufFile::Open(SourcePath(relative_gguf));
  INFO(relative_gguf << ": " << file.status());
  REQUIRE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  INFO(tok.status());
  REQUIRE(tok.ok());
  return std::move(tok).value();
}

}  // namespace odmoe::test
