// The HTTP API driven by the clients people use: the official `openai`
// Python client and `langchain-openai` (tests/clients/openai_clients.py)
// against the ten-node testbed as real processes. Development-time tools:
// where they are not installed (CI) the case passes with a warning.
#include <catch2/catch.hpp>

#include "process_testbed.h"

namespace odmoe::test {
namespace {

TEST_CASE("clients: the openai client and langchain-openai against the testbed",
          "[cluster][clients]") {
  const ShellResult probe = Sh("python3 -c 'import openai, langchain_openai' 2>&1");
  if (probe.exit_code != 0) {
    WARN("openai / langchain-openai not installed (pip install openai langchain-openai): "
         "client case skipped");
    return;
  }
  const int http = FreePort();
  TestbedSpec spec;
  spec.main_extra = absl::StrCat("  http: 127.0.0.1:", http, "\n");
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_clients", spec);
  const ShellResult up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const ShellResult r = Sh(absl::StrCat("python3 ", SourcePath("tests/clients/openai_clients.py"),
                                        " http://127.0.0.1:", http, "/v1 2>&1"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("every check passed") != std::string::npos);
}

}  // namespace
}  // namespace odmoe::test
