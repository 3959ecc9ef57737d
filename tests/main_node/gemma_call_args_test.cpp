// Gemma 4's argument notation (main_node/gemma_call_args.h) translated to
// JSON: what its template writes (format_argument) for every kind of value,
// the looser forms a grammar or a model may write, byte-at-a-time equal to
// whole, and every malformed text an error.
#include "main_node/gemma_call_args.h"

#include <catch2/catch.hpp>
#include <string>

#include "nlohmann/json.hpp"

namespace odmoe::test {
namespace {

using Step = GemmaArgsTranslator::Step;

// The JSON of `text`, or "error" / "more" when it fails / does not finish.
std::string Translate(std::string_view text) {
  GemmaArgsTranslator t;
  std::string json;
  for (char c : text) {
    const Step s = t.Feed(c, &json);
    if (s == Step::kError) return "error";
    if (s == Step::kDone) return json;
  }
  return "more";
}

TEST_CASE("gemma args: the template's notation reads as JSON", "[tool_calls][gemma]") {
  const std::pair<std::string, std::string> cases[] = {
      {R"({city:<|"|>Paris<|"|>,days:3})", R"({"city": "Paris", "days": 3})"},
      {"{}", "{}"},
      {R"({a:true,b:false,c:-1.5e3,d:0})", R"({"a": true, "b": false, "c": -1.5e3, "d": 0})"},
      {R"({tags:[<|"|>x<|"|>,<|"|>y<|"|>],n:[]})", R"({"tags": ["x", "y"], "n": []})"},
      {R"({f:{lang:<|"|>en<|"|>,deep:{k:[1,[2]]}}})",
       R"({"f": {"lang": "en", "deep": {"k": [1, [2]]}}})"},
      // Text as it is between the marks: quotes, backslashes, newlines, <, |, UTF-8.
      {"{q:<|\"|>say \"hi\" \\ <b>|x| a<|b\nné 🙂<|\"|>}",
       R"({"q": "say \"hi\" \\ <b>|x| a<|b\nné 🙂"})"},
      // What a grammar or another writer may add: spaces, quoted keys, JSON strings, Python
      // literals.
      {R"( { "a" : "x\"y" , <|"|>b c<|"|>:None , c : True } )",
       R"({"a": "x\"y", "b c": null, "c": true})"},
      {R"({u:"\u00e9\n"})", R"({"u": "\u00e9\n"})"},
  };
  for (const auto& [in, want] : cases) {
    INFO(in);
    const std::string got = Translate(in);
    CHECK(got == want);
    CHECK(nlohmann::json::parse(got, nullptr, false).is_object());
  }
}

TEST_CASE("gemma args: malformed notation is an error, unfinished asks for more",
          "[tool_calls][gemma]") {
  for (std::string_view bad : {"x", "[1]", "{a}", "{a:}", "{a:1,}", "{a:1 b:2}", "{:1}", "{a:tru}",
                               "{a:01}", "{a:1.}", "{a:<x>}", "{a:<|'|>x}", R"({a:"\q"})",
                               R"({a:"\u12g4"})", "{a:[1,]}", "{a:1]", "{a:\"x\ny\"}", "{a b:1}"}) {
    INFO(bad);
    CHECK(Translate(bad) == "error");
  }
  for (std::string_view open : {"{a:<|\"|>x", "{a:[1", "{a:{b:2}", "{a", "  "}) {
    INFO(open);
    CHECK(Translate(open) == "more");
  }
  std::string deep = "{a:";
  for (size_t i = 0; i < GemmaArgsTranslator::kMaxDepth + 1; ++i) deep += "[";
  CHECK(Translate(deep) == "error");
  CHECK(Translate("{" + std::string(GemmaArgsTranslator::kMaxToken + 1, 'k') + ":1}") == "error");
}

}  // namespace
}  // namespace odmoe::test
