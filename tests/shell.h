// Running a command as a user would, for the tests of tools and daemons.
//
//   test::ShellResult r = test::Sh(BinaryPath("bin/odmoe-run") + " --bogus");
//   CHECK(r.exit_code == 1);  CHECK(r.output.find("error:") != std::string::npos);
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace odmoe::test {

struct ShellResult {
  int exit_code;       // 128 when it did not exit normally
  std::string output;  // stdout + stderr
};

/// Runs `command` with /bin/sh, stderr merged into stdout.
inline ShellResult Sh(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {127, "popen failed"};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, output};
}

}  // namespace odmoe::test
