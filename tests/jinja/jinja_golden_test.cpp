// The Jinja engine against Python's jinja2: every case of
// tests/data/golden/jinja_cases.json (templates of our own, rendered by
// scripts/fixtures/make_jinja_golden.py in transformers' environment) renders
// byte for byte, and every error case fails with its message.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "jinja/template.h"
#include "jinja_test_util.h"
#include "test_paths.h"

namespace odmoe::jinja {
namespace {

using json = nlohmann::ordered_json;

json LoadCases() {
  const std::string path = test::SourcePath("tests/data/golden/jinja_cases.json");
  std::ifstream in(path);
  INFO("missing golden file " << path);
  REQUIRE(in.good());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  REQUIRE(j.is_object());
  REQUIRE(j["cases"].size() > 100);
  return j["cases"];
}

TEST_CASE("jinja: every golden case renders as jinja2 does", "[jinja]") {
  int rendered = 0, failed = 0;
  for (const json& c : LoadCases()) {
    const std::string name = c["name"];
    INFO("case " << name << "\ntemplate: " << c["template"].get<std::string>());
    auto t = Template::Compile(c["template"].get<std::string>());
    if (c.contains("error")) {
      absl::StatusOr<std::string> out =
          t.ok() ? t->Render(c["context"], TestRenderOptions()) : t.status();
      INFO("output: " << (out.ok() ? *out : out.status().ToString()));
      CHECK_FALSE(out.ok());
      if (!out.ok()) {
        CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
        CHECK_THAT(std::string(out.status().message()),
                   Catch::Contains(c["error"].get<std::string>()));
        CHECK_THAT(std::string(out.status().message()), Catch::StartsWith("chat template line "));
      }
      continue;
    }
    absl::StatusOr<std::string> out =
        t.ok() ? t->Render(c["context"], TestRenderOptions()) : t.status();
    INFO("error: " << out.status().ToString());
    CHECK(out.ok());
    if (!out.ok()) {
      ++failed;
      continue;
    }
    CHECK(*out == c["expected"].get<std::string>());
    (*out == c["expected"].get<std::string>() ? rendered : failed)++;
  }
  CHECK(failed == 0);
  CHECK(rendered > 100);
}

TEST_CASE("jinja: a runaway template stops at its limits", "[jinja]") {
  RenderOptions options = TestRenderOptions();
  options.limits.max_steps = 10000;
  auto loop = Template::Compile(
      "{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}");
  REQUIRE(loop.ok());
  auto out = loop->Render(json::object(), options);
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("steps"));

  auto recurse = Template::Compile("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  REQUIRE(recurse.ok());
  out = recurse->Render(json::object(), TestRenderOptions());
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("nested deeper"));

  options = TestRenderOptions();
  options.limits.max_output_bytes = 1000;
  auto big = Template::Compile("{% for a in range(100) %}{{ 'x' * 100 }}{% endfor %}");
  REQUIRE(big.ok());
  out = big->Render(json::object(), options);
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("output longer than 1000 bytes"));
}

TEST_CASE("jinja: values cannot nest without bound, cycles print", "[jinja]") {
  // A namespace that holds itself prints with "..." where Python prints a cycle.
  auto cycle = Template::Compile(
      "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}{{ ns }}");
  REQUIRE(cycle.ok());
  auto out = cycle->Render(json::object(), TestRenderOptions());
  REQUIRE(out.ok());
  CHECK(out->starts_with("True<Namespace {'me': <Namespace {'me': "));
  CHECK(out->find("...") != std::string::npos);
  // Nesting grown in a loop stops at the bound.
  auto grow = Template::Compile(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor "
      "%}");
  REQUIRE(grow.ok());
  out = grow->Render(json::object(), TestRenderOptions());
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("values nested deeper than 128"));
  // A context nested past the bound is refused before it is walked.
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({std::move(deep)});
  auto plain = Template::Compile("{{ x|length }}");
  REQUIRE(plain.ok());
  out = plain->Render(json{{"x", std::move(deep)}}, TestRenderOptions());
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("nests deeper than 128"));
}

TEST_CASE("jinja: deep nesting is a compile error, not a stack overflow", "[jinja]") {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto t = Template::Compile(deep);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()), Catch::Contains("nesting deeper"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  t = Template::Compile(ifs);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()), Catch::Contains("nesting deeper"));
}

TEST_CASE("jinja: compile errors name the line", "[jinja]") {
  auto t = Template::Compile("a\nb\n{% for x in %}\n{% endfor %}");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()), Catch::StartsWith("chat template line 3: "));
  t = Template::Compile("{% if x %}\n{% endfor %}", "tool_use template");
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()), Catch::StartsWith("tool_use template line 2"));
}

}  // namespace
}  // namespace odmoe::jinja
