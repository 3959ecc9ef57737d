// Grammars against references, on tests/data/golden/grammar_cases.json
// (scripts/fixtures/make_grammar_golden.py): GBNF grammars accept exactly what
// the script's reference matcher accepts; grammars made from JSON Schemas
// accept nothing that Python's json + jsonschema reject, and every valid
// string written the canonical way (see json_schema.h for what is stricter).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "test_paths.h"

namespace odmoe {
namespace {

nlohmann::ordered_json LoadCases() {
  const std::string path = test::SourcePath("tests/data/golden/grammar_cases.json");
  std::ifstream in(path);
  INFO("missing golden file " << path);
  REQUIRE(in.good());
  auto j = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_object());
  return j;
}

using test::MatchesAll;

TEST_CASE("GBNF grammars accept exactly what the reference matcher accepts", "[grammar][golden]") {
  const auto cases = LoadCases();
  size_t strings = 0, matches = 0;
  REQUIRE(cases.at("gbnf").size() >= 10);
  for (const auto& g : cases.at("gbnf")) {
    const std::string name = g.at("name");
    auto grammar = ParseGbnf(g.at("grammar").get<std::string>());
    INFO(name << ": " << grammar.status());
    REQUIRE(grammar.ok());
    for (const auto& c : g.at("cases")) {
      const std::string text = c.at("text");
      INFO(name << ": \"" << text << "\"");
      CHECK(MatchesAll(*grammar, text) == c.at("match").get<bool>());
      ++strings;
      matches += c.at("match").get<bool>();
    }
  }
  CHECK(strings > 1000);
  CHECK(matches > 300);
  WARN("GBNF: " << strings << " strings, " << matches << " matching");
}

TEST_CASE("JSON Schema grammars are never looser than jsonschema, exact on canonical text",
          "[grammar][golden]") {
  const auto cases = LoadCases();
  size_t strings = 0, accepted = 0, valid_refused = 0;
  REQUIRE(cases.at("schema").size() >= 15);
  for (const auto& s : cases.at("schema")) {
    const std::string name = s.at("name");
    auto gbnf =
        JsonSchemaToGbnf(s.at("schema"), JsonSchemaOptions{.strict = s.at("strict").get<bool>()});
    INFO(name << ": " << gbnf.status());
    REQUIRE(gbnf.ok());
    auto grammar = ParseGbnf(*gbnf);
    INFO(*gbnf << "\n-> " << grammar.status());
    REQUIRE(grammar.ok());
    size_t canonical = 0;
    for (const auto& c : s.at("cases")) {
      const std::string text = c.at("text");
      const bool valid = c.at("valid"), is_canonical = c.at("canonical");
      const bool accepts = MatchesAll(*grammar, text);
      INFO(name << ": " << text << " (valid " << valid << ", canonical " << is_canonical << ")");
      if (accepts) CHECK(valid);
      if (is_canonical) CHECK(accepts);
      ++strings;
      accepted += accepts;
      canonical += is_canonical;
      valid_refused += valid && !accepts;
    }
    CHECK(canonical >= 15);
  }
  CHECK(strings > 5000);
  WARN("JSON Schema: " << strings << " strings, " << accepted << " accepted, " << valid_refused
                       << " valid but not canonical, refused");
}

}  // namespace
}  // namespace odmoe
