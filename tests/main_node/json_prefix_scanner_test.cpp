// The byte-at-a-time JSON checker (main_node/json_prefix_scanner.h) against
// nlohmann's parser: it ends a value exactly where the value ends and fails
// at the first byte that makes the text not JSON.
#include "main_node/json_prefix_scanner.h"

#include <catch2/catch.hpp>
#include <string>

#include "nlohmann/json.hpp"

namespace odmoe::test {
namespace {

// Where the scanner ends (bytes consumed) or -1 for an error / no end.
int Scan(const std::string& text, bool* complete) {
  JsonPrefixScanner scan;
  for (size_t i = 0; i < text.size(); ++i) {
    switch (scan.Feed(text[i])) {
      case JsonScanStep::kMore:
        break;
      case JsonScanStep::kDone:
        *complete = true;
        return static_cast<int>(i + 1);
      case JsonScanStep::kDoneBefore:
        *complete = true;
        return static_cast<int>(i);
      case JsonScanStep::kError:
        *complete = false;
        return -1;
    }
  }
  *complete = scan.Complete();
  return *complete ? static_cast<int>(text.size()) : -1;
}

TEST_CASE("json prefix scanner: agrees with a JSON parser", "[tool_calls]") {
  const char* texts[] = {R"({"a": [1, -2.5e+3, true, false, null, "x\"\\\u00e9"], "b": {}})",
                         R"([])",
                         R"("s")",
                         "0",
                         "-0.5",
                         "12e3",
                         " {\"k\" : [ ] } ",
                         R"({"a" 1})",
                         R"({"a": 01})",
                         R"({"a": tru})",
                         R"({"a": "\x"})",
                         "[1,]",
                         "{,}",
                         R"({"a": 1,})",
                         "-",
                         "1.",
                         "1e",
                         R"("\u12G4")",
                         "[1 2]",
                         "nul",
                         "{\"a\":\"\n\"}",
                         "[[[[]]]]",
                         R"({"a": [{"b": [1, {"c": "}"}]}]})"};
  for (const std::string text : texts) {
    INFO(text);
    bool complete = false;
    const int end = Scan(text, &complete);
    const bool valid = nlohmann::json::accept(text);
    if (valid) {
      REQUIRE(complete);
      // Only whitespace may follow where the scanner says the value ended.
      CHECK(text.find_first_not_of(" \t\n\r", end) == std::string::npos);
    } else {
      CHECK_FALSE(complete);
    }
  }
}

TEST_CASE("json prefix scanner: nothing follows an end or an error", "[tool_calls]") {
  JsonPrefixScanner done;
  CHECK(done.Feed('1') == JsonScanStep::kMore);
  CHECK(done.Feed(' ') == JsonScanStep::kDoneBefore);
  CHECK(done.Complete());
  CHECK(done.Feed('1') == JsonScanStep::kError);
  JsonPrefixScanner bad;
  CHECK(bad.Feed('x') == JsonScanStep::kError);
  CHECK(bad.Feed('1') == JsonScanStep::kError);
  CHECK_FALSE(bad.Complete());
}

TEST_CASE("json prefix scanner: nesting is bounded", "[tool_calls]") {
  bool complete = true;
  CHECK(Scan(std::string(kJsonScannerMaxDepth, '[') + std::string(kJsonScannerMaxDepth, ']'),
             &complete) > 0);
  CHECK(Scan(std::string(kJsonScannerMaxDepth + 1, '['), &complete) == -1);
}

}  // namespace
}  // namespace odmoe::test
