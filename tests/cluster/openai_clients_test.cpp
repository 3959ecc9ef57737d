// The HTTP API driven by the clients people use: the official `openai`
// Python client and `langchain-openai` (tests/clients/openai_clients.py)
// against the ten-node testbed as real processes. The libraries come from
// scripts/client_venv.sh (scripts/test.sh runs it and names its python in
// ODMOE_CLIENT_PYTHON); where they are not installed the case passes with a
// warning.
#include <catch2/catch.hpp>

#include "client_python.h"
#include "process_testbed.h"

namespace odmoe::test {
namespace {

// Runs tests/clients/<script> against a testbed serving HTTP (main.context
// `context`, 0: the model's), when `modules` import; "every ... passed" is
// the script's last line when all its checks held.
void RunClientScript(const std::string& script, const std::string& modules, int context,
                     const std::string& passed) {
  const std::string python = ClientPython();
  const ShellResult probe = Sh(absl::StrCat(python, " -c 'import ", modules, "' 2>&1"));
  if (probe.exit_code != 0) {
    WARN(modules << " not installed (scripts/client_venv.sh): client case skipped");
    return;
  }
  const int http = FreePort();
  TestbedSpec spec;
  spec.main_extra = absl::StrCat("  http: 127.0.0.1:", http, "\n");
  if (context > 0) absl::StrAppend(&spec.main_extra, "  context: ", context, "\n");
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_clients", spec);
  const ShellResult up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const ShellResult r = Sh(absl::StrCat(python, " ", SourcePath("tests/clients/" + script),
                                        " http://127.0.0.1:", http, "/v1 2>&1"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find(passed) != std::string::npos);
}

TEST_CASE("clients: the openai client and langchain-openai against the testbed",
          "[cluster][clients]") {
  RunClientScript("openai_clients.py", "openai, langchain_openai", 0, "every check passed");
}

TEST_CASE(
    "clients: tool calls and structured output from the openai client and langchain and "
    "pydantic-ai",
    "[cluster][clients]") {
  // Room for the tools the fallback template lists and replies whose JSON the
  // tiny model pads with whitespace.
  RunClientScript("agent_clients.py", "openai, langchain_openai, pydantic_ai", 2048,
                  "every agent check passed");
}

}  // namespace
}  // namespace odmoe::test
