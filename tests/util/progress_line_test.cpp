// ProgressLine off a terminal: the first update at once, later ones only when
// the interval passed, the final line always.
#include "util/progress_line.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <thread>

namespace odmoe {
namespace {

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  return out;
}

TEST_CASE("progress line: plain lines off a terminal, throttled, final line always", "[util]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressLine p(f, std::chrono::milliseconds(200));
    CHECK_FALSE(p.tty());
    p.Update("1 %");
    p.Update("2 %");  // within the interval: not written
    p.Update("2 %");
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    p.Update("3 %");
    p.Update("3 %");  // unchanged: never written twice
    p.Finish("done");
  }
  CHECK(Contents(f) == "1 %\n3 %\ndone\n");
  std::fclose(f);
}

TEST_CASE("progress line: after a final line, updates wait for the interval", "[util]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressLine p(f, std::chrono::milliseconds(200));
    p.Finish("result 1");
    p.Update("running 1");  // right after a line: not written
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    p.Update("running 2");
    p.Finish("result 2");
  }
  CHECK(Contents(f) == "result 1\nrunning 2\nresult 2\n");
  std::fclose(f);
}

}  // namespace
}  // namespace odmoe
