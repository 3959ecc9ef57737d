// JSON Schema -> GBNF (grammar/json_schema.h): the errors that name the
// keyword, integer and number ranges checked value by value, extra keys,
// recursion, and the bounds on hostile schemas.
#include "grammar/json_schema.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_regex.h"
#include "grammar_test_util.h"

namespace odmoe {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> FromSchema(const std::string& schema,
                                          JsonSchemaOptions options = {}) {
  auto gbnf = JsonSchemaToGbnf(std::string_view(schema), options);
  INFO(schema << " -> " << gbnf.status());
  REQUIRE(gbnf.ok());
  return test::CompileGbnf(*gbnf);
}

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  return test::MatchesAll(g, s);
}

/// The INVALID_ARGUMENT message converting `schema` gives.
std::string ErrorOf(const std::string& schema) {
  const absl::Status status = JsonSchemaToGbnf(std::string_view(schema)).status();
  INFO(schema);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

TEST_CASE("unsupported keywords are errors naming their path", "[grammar]") {
  CHECK(ErrorOf(R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})") ==
        "json_schema /properties/tags/uniqueItems: 'uniqueItems' is not supported");
  CHECK(ErrorOf(R"({"not":{"type":"string"}})") == "json_schema /not: 'not' is not supported");
  CHECK(ErrorOf(R"({"type":"integer","multipleOf":3})") ==
        "json_schema /multipleOf: 'multipleOf' is not supported");
  CHECK(ErrorOf(R"({"type":"object","patternProperties":{"^x":{}}})") ==
        "json_schema /patternProperties: 'patternProperties' is not supported");
  CHECK(ErrorOf(R"({"$ref":"https://example.com/s.json"})") ==
        "json_schema /: $ref 'https://example.com/s.json': only references inside the schema "
        "(#...) are supported");
  CHECK(ErrorOf(R"({"$ref":"#/$defs/missing"})") ==
        "json_schema /: $ref '#/$defs/missing' points at nothing");
  CHECK(ErrorOf(R"({"type":"number","minimum":0.5})") ==
        "json_schema /: bounds on a number must be integers (fractional bounds are not supported)");
  CHECK(ErrorOf(R"j({"type":"string","pattern":"(?=x)"})j") ==
        "json_schema /pattern: pattern at 1: lookaround and named groups are not supported");
  CHECK(ErrorOf(R"({"type":"spaceship"})") == "json_schema /type: unknown type 'spaceship'");
  CHECK(ErrorOf(R"(false)") == "json_schema /: the schema false accepts nothing");
  CHECK(ErrorOf(R"({"type":"array","minItems":3,"maxItems":2})") ==
        "json_schema /: maxItems below minItems accepts nothing");
  CHECK_THAT(ErrorOf("{not json"), Catch::Contains("not valid JSON"));
  // Keywords that narrow nothing are fine.
  CHECK(
      JsonSchemaToGbnf(
          std::string_view(R"({"type":"array","uniqueItems":false,"title":"t","minProperties":0})"))
          .ok());
}

TEST_CASE("integer ranges accept exactly their values", "[grammar]") {
  const std::pair<std::string, std::pair<int, int>> ranges[] = {
      {R"("minimum":0,"maximum":150)", {0, 150}},
      {R"("minimum":-120,"maximum":37)", {-120, 37}},
      {R"("exclusiveMinimum":9,"exclusiveMaximum":1001)", {10, 1000}},
      {R"("minimum":-999,"maximum":-10)", {-999, -10}},
      {R"("minimum":7.5,"maximum":19.9)", {8, 19}},
      {R"("minimum":1000)", {1000, 1 << 30}},
      {R"("maximum":-3)", {-(1 << 30), -3}},
  };
  for (const auto& [bounds, range] : ranges) {
    const auto g = FromSchema(R"({"type":"integer",)" + bounds + "}");
    for (int v = -1200; v <= 1200; ++v) {
      INFO(bounds << " " << v);
      CHECK(Matches(g, std::to_string(v)) == (v >= range.first && v <= range.second));
    }
    CHECK_FALSE(Matches(g, "012"));
    CHECK_FALSE(Matches(g, "-0"));
    CHECK_FALSE(Matches(g, "1.0"));
  }
  CHECK(Matches(FromSchema(R"({"type":"integer","minimum":1000})"), "123456789012345"));
}

TEST_CASE("numbers with integer bounds", "[grammar]") {
  struct Case {
    const char* schema;
    std::vector<const char*> accepted, refused;
  };
  const Case cases[] = {
      {R"({"type":"number","minimum":-2,"maximum":100})",
       {"0", "100", "100.0", "99.999", "-2", "-2.000", "-1.5", "0.25", "-0.5", "37"},
       {"100.5", "101", "-2.5", "-3", "1e2", "1000", "-", "00.5"}},
      // (0, 1) has no integer, only fractions.
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
       {"0.5", "0.001", "0.999", "0.10"},
       {"0", "0.0", "1", "1.0", "-0.5", "1.5", "0.000"}},
      {R"({"type":"number","exclusiveMinimum":0})", {"12345.5", "3"}, {"0.00", "-1"}},
      {R"({"type":"number","maximum":-3})", {"-3.0", "-3.5", "-1000"}, {"-2.5", "3"}},
  };
  for (const Case& c : cases) {
    const auto g = FromSchema(c.schema);
    for (const char* text : c.accepted) {
      INFO(c.schema << " " << text);
      CHECK(Matches(g, text));
    }
    for (const char* text : c.refused) {
      INFO(c.schema << " " << text);
      CHECK_FALSE(Matches(g, text));
    }
  }
}

TEST_CASE("objects: order, optional properties, extra keys", "[grammar]") {
  const std::string schema =
      R"({"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]})";
  const auto strict = FromSchema(schema);
  CHECK(Matches(strict, R"({"id":1})"));
  CHECK(Matches(strict, R"({ "id": 1, "name": "x" })"));
  CHECK_FALSE(Matches(strict, R"({"name":"x"})"));
  CHECK_FALSE(Matches(strict, R"({"id":1,"other":2})"));
  CHECK_FALSE(Matches(strict, R"({"id":1,})"));
  const auto open = FromSchema(schema, JsonSchemaOptions{.strict = false});
  CHECK(Matches(open, R"({"id":1,"other":[2]})"));
  CHECK(Matches(open, R"({"id":1,"i":2,"idx":3,"nam":4,"names":5})"));
  CHECK_FALSE(Matches(open, R"({"id":1,"id":2})"));    // a declared key is not an extra one
  CHECK_FALSE(Matches(open, R"({"id":1,"name":2})"));  // ...and keeps its schema
  // additionalProperties as a schema.
  const auto typed = FromSchema(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  CHECK(Matches(typed, R"({"a":1,"b":2})"));
  CHECK_FALSE(Matches(typed, R"({"a":"x"})"));
  // json_object: any object, nothing else.
  const auto any = ParseGbnf(JsonObjectGbnf()).value();
  CHECK(Matches(any, R"({"a":[1,{"b":null}],"c":"\u00e9\n"})"));
  CHECK_FALSE(Matches(any, R"([1])"));
  CHECK_FALSE(Matches(any, R"("x")"));
}

TEST_CASE("recursive $ref and long strings", "[grammar]") {
  const auto tree = FromSchema(R"({"$defs":{"n":{"type":"object","properties":{"k":{"type":"array",
      "items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"})");
  CHECK(Matches(tree, R"({"k":[{"k":[{}]},{}]})"));
  CHECK_FALSE(Matches(tree, R"({"k":[1]})"));
  const auto self = FromSchema(R"({"type":"array","items":{"$ref":"#"},"maxItems":2})");
  CHECK(Matches(self, "[[],[[]]]"));
  const auto long_string = FromSchema(R"({"type":"string","minLength":1500,"maxLength":2600})");
  for (const int n : {0, 1499, 1500, 2000, 2600, 2601}) {
    INFO(n);
    CHECK(Matches(long_string, "\"" + std::string(n, 'x') + "\"") == (n >= 1500 && n <= 2600));
  }
}

TEST_CASE("patterns", "[grammar]") {
  const auto g = FromSchema(R"({"type":"string","pattern":"^[A-Z]{2}\\d?-(x|yz)+$"})");
  CHECK(Matches(g, R"("AB-x")"));
  CHECK(Matches(g, R"("AB7-yzx")"));
  CHECK_FALSE(Matches(g, R"("AB-")"));
  CHECK_FALSE(Matches(g, R"("ab-x")"));
  CHECK_FALSE(Matches(g, R"(" AB-x")"));
  const auto search = FromSchema(R"({"type":"string","pattern":"a\"b"})");
  CHECK(Matches(search, R"("xxa\"byy")"));
  CHECK_FALSE(Matches(search, R"("ab")"));
  for (const char* bad : {"a\\1", "\\bword", "a^b", "(?<n>x)", "x**", "[z-a]"}) {
    INFO(bad);
    CHECK_FALSE(RegexToGbnf(bad).ok());
  }
}

TEST_CASE("hostile schemas are refused, not followed", "[grammar]") {
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  CHECK_THAT(ErrorOf(deep), Catch::Contains("nested deeper than 64"));
  // A $ref loop without structure in between is left recursion for the grammar.
  auto loop = JsonSchemaToGbnf(std::string_view(
      R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"));
  if (loop.ok()) CHECK_FALSE(ParseGbnf(*loop).ok());
  std::string wide = R"({"type":"object","properties":{)";
  for (int i = 0; i < 20000; ++i)
    wide += (i ? "," : "") + std::string("\"p") + std::to_string(i) +
            "\":{\"type\":\"string\",\"maxLength\":900}";
  wide += "}}";
  auto big = JsonSchemaToGbnf(std::string_view(wide));
  if (big.ok()) CHECK_FALSE(ParseGbnf(*big).ok());
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

/// A random schema from keywords this converter knows and some it refuses.
ojson RandomSchema(std::mt19937& rng, int depth) {
  static const char* const kTypes[] = {"object", "array",   "string", "integer",
                                       "number", "boolean", "null"};
  ojson s = ojson::object();
  switch (rng() % 12) {
    case 0:
      s["type"] = kTypes[rng() % 7];
      break;
    case 1:
      s["enum"] = ojson::array({1, "a", nullptr});
      break;
    case 2:
      s["anyOf"] = ojson::array();
      break;
    case 3:
      s["$ref"] = rng() % 2 ? "#" : "#/$defs/x";
      break;
    case 4:
      s["type"] = ojson::array({kTypes[rng() % 7], kTypes[rng() % 7]});
      break;
    case 5:
      s["not"] = ojson::object();
      break;
    default:
      s["type"] = kTypes[rng() % 2];
      break;
  }
  if (depth < 6) {
    if (rng() % 2) s["properties"]["p" + std::to_string(rng() % 3)] = RandomSchema(rng, depth + 1);
    if (rng() % 3 == 0) s["items"] = RandomSchema(rng, depth + 1);
    if (rng() % 4 == 0) s["anyOf"].push_back(RandomSchema(rng, depth + 1));
    if (rng() % 5 == 0) s["allOf"] = ojson::array({RandomSchema(rng, depth + 1)});
    if (rng() % 5 == 0)
      s["additionalProperties"] = rng() % 2 ? ojson(false) : RandomSchema(rng, depth + 1);
  }
  if (rng() % 4 == 0) s["minItems"] = static_cast<int>(rng() % 5) - 1;
  if (rng() % 4 == 0) s["maxLength"] = rng() % 3000;
  if (rng() % 4 == 0) s["minimum"] = static_cast<int>(rng() % 200) - 100;
  if (rng() % 6 == 0) s["required"] = ojson::array({"p" + std::to_string(rng() % 3)});
  if (rng() % 8 == 0) s["pattern"] = rng() % 2 ? "^a(b|c)*$" : "(?=x";
  if (depth == 0 && rng() % 2) s["$defs"]["x"] = RandomSchema(rng, depth + 1);
  return s;
}

TEST_CASE("random schemas convert or fail cleanly, and their grammars run", "[grammar]") {
  std::mt19937 rng(34);
  int converted = 0, compiled = 0;
  for (int i = 0; i < 400; ++i) {
    const ojson schema = RandomSchema(rng, 0);
    auto gbnf = JsonSchemaToGbnf(schema);
    if (!gbnf.ok()) {
      INFO(schema.dump() << ": " << gbnf.status());
      CHECK(gbnf.status().code() == absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++converted;
    auto g = ParseGbnf(*gbnf);
    if (!g.ok()) continue;  // e.g. a $ref cycle without structure: left recursion
    ++compiled;
    GrammarMatcher m(*g);
    for (const char* text : {"{\"p0\": [1, \"x\"]}", "[[[[null]]]]", "\"abc\"", "-12.5e3"}) {
      GrammarMatcher fresh(*g);
      fresh.AcceptBytes(text);
    }
  }
  CHECK(converted > 100);
  CHECK(compiled > 100);
}

TEST_CASE("deeply nested JSON is refused at the matcher's bound, quickly", "[grammar]") {
  const auto any = test::CompileGbnf(JsonObjectGbnf());
  GrammarMatcher m(any);
  REQUIRE(m.AcceptBytes("{\"a\":"));
  int depth = 0;
  while (depth < 100000 && m.AcceptBytes("[")) ++depth;
  CHECK(depth > 100);
  CHECK(depth < 100000);
  // Random bytes never crash the matcher.
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0123456789.-eE \\utrfalsenul\xc3\xa9\xff";
  for (int i = 0; i < 2000; ++i) {
    GrammarMatcher r(any);
    std::string bytes;
    for (int k = 0; k < 30; ++k) bytes += alphabet[rng() % alphabet.size()];
    r.AcceptBytes(bytes);
  }
}

}  // namespace
}  // namespace odmoe

namespace odmoe {
namespace {

TEST_CASE("grammars of several schemas join (a tool call's arguments)", "[grammar]") {
  std::string gbnf = "root ::= \"<tool_call>\" (weather | search) \"</tool_call>\"\n";
  auto weather = JsonSchemaToGbnf(
      std::string_view(
          R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"),
      JsonSchemaOptions{.root_rule = "weather", .rule_prefix = "w-"});
  auto search = JsonSchemaToGbnf(
      std::string_view(
          R"({"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}}})"),
      JsonSchemaOptions{.root_rule = "search", .rule_prefix = "s-"});
  REQUIRE(weather.ok());
  REQUIRE(search.ok());
  const auto g = test::CompileGbnf(gbnf + *weather + *search);
  CHECK(Matches(g, R"(<tool_call>{"city": "Paris"}</tool_call>)"));
  CHECK(Matches(g, R"(<tool_call>{"q": "x", "n": 3}</tool_call>)"));
  CHECK(Matches(g, R"(<tool_call>{}</tool_call>)"));  // search has no required property
  CHECK_FALSE(Matches(g, R"(<tool_call>{"city": 1}</tool_call>)"));
  CHECK_FALSE(
      JsonSchemaToGbnf(std::string_view("{}"), JsonSchemaOptions{.root_rule = "json-x"}).ok());
  CHECK_FALSE(
      JsonSchemaToGbnf(std::string_view("{}"), JsonSchemaOptions{.rule_prefix = "a b"}).ok());
}

}  // namespace
}  // namespace odmoe
