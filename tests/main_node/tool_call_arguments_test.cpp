// Tagged argument values typed by the tool's schema
// (main_node/tool_call_arguments.h).
#include "main_node/tool_call_arguments.h"

#include <catch2/catch.hpp>

namespace odmoe::test {
namespace {

TEST_CASE("tool call arguments: tagged values take the schema's types", "[tool_calls]") {
  const auto schema = nlohmann::json::parse(R"({"type": "object", "properties": {
      "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
      "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
      "sn": {"type": ["string", "null"]}, "any": {"description": "no type"}}})");
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"s", "42", "\"42\""},
      {"s", "line\n\"q\"", "\"line\\n\\\"q\\\"\""},
      {"i", "3", "3"},
      {"i", " 3 ", "3"},
      {"i", "3.5", "\"3.5\""},
      {"i", "three", "\"three\""},
      {"n", "3.5", "3.5"},
      {"b", "true", "true"},
      {"b", "False", "false"},
      {"b", "yes", "\"yes\""},
      {"o", "{\"k\": [1]}", "{\"k\":[1]}"},
      {"o", "[1]", "\"[1]\""},
      {"a", "[1, 2]", "[1,2]"},
      {"sn", "null", "null"},
      {"sn", "x", "\"x\""},
      {"any", "7", "7"},
      {"any", "seven", "\"seven\""},
      {"unknown", "7", "\"7\""},
  };
  for (const auto& [key, value, want] : cases) {
    INFO(key << " = " << value);
    CHECK(TaggedArgumentJson(schema, key, value) == want);
  }
  CHECK(TaggedArgumentJson(nlohmann::json(), "k", "\xff") == "\"\xef\xbf\xbd\"");
}

}  // namespace
}  // namespace odmoe::test
