// The python3 the tests run Python references and client libraries with:
// ODMOE_CLIENT_PYTHON (scripts/test.sh sets it to the venv of
// scripts/client_venv.sh), else that venv where it exists, else python3. A
// test that needs a module checks it imports and passes with a warning where
// it does not.
//
//   const std::string python = test::ClientPython();
//   if (Sh(python + " -c 'import jsonschema'").exit_code != 0) { WARN(...); return; }
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace odmoe::test {

inline std::string ClientPython() {
  if (const char* p = std::getenv("ODMOE_CLIENT_PYTHON"); p != nullptr && *p != 0) return p;
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    const std::string venv = std::string(home) + "/.cache/odmoe/client-venv/bin/python3";
    if (std::filesystem::exists(venv)) return venv;
  }
  return "python3";
}

}  // namespace odmoe::test
