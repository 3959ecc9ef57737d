// StepProgress off a terminal: silent for a quick step; past quiet_for, log
// lines (throttled by the interval) and a final line with the total.
#include "util/step_progress.h"

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

namespace odmoe {
namespace {

StepProgress::Options Capture(std::vector<std::string>* lines, int quiet_ms, int interval_ms) {
  StepProgress::Options o;
  o.quiet_for = std::chrono::milliseconds(quiet_ms);
  o.interval = std::chrono::milliseconds(interval_ms);
  o.log = [lines](const std::string& line) { lines->push_back(line); };
  return o;
}

TEST_CASE("step progress: a quick step prints nothing", "[util]") {
  std::vector<std::string> lines;
  StepProgress p("loading", 4, "layers", Capture(&lines, 60'000, 0));
  for (int i = 0; i < 4; ++i) p.Advance(1, 1024);
  p.Finish();
  CHECK(lines.empty());
}

TEST_CASE("step progress: a long step logs its progress and its total", "[util]") {
  std::vector<std::string> lines;
  {
    StepProgress p("loading weights onto cuda:0", 4, "layers", Capture(&lines, 0, 60'000));
    p.Advance(1, 3u << 20);  // first line at once
    p.Advance(1, 1u << 20);  // within the interval: not written
    p.Advance(2, 0);
    p.Finish();
    p.Finish();  // once only
  }
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].rfind("loading weights onto cuda:0: 25 % (1 of 4 layers, 3.0 MiB, ", 0) == 0);
  CHECK(lines[1].rfind("loading weights onto cuda:0: done, 4 layers (4.0 MiB) in ", 0) == 0);
}

TEST_CASE("step progress: lines follow the interval", "[util]") {
  std::vector<std::string> lines;
  StepProgress p("packing experts", 3, "experts", Capture(&lines, 0, 100));
  p.Advance(1);
  p.Advance(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  p.Advance(1);
  p.Finish();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("packing experts: 33 % (1 of 3 experts, ", 0) == 0);
  CHECK(lines[1].rfind("packing experts: 100 % (3 of 3 experts, ", 0) == 0);
  CHECK(lines[2].rfind("packing experts: done, 3 experts in ", 0) == 0);
}

TEST_CASE("step progress: byte sizes read as people write them", "[util]") {
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(3 * 1024) == "3.0 KiB");
  CHECK(FormatBytes(12 * 1024 * 1024 + 512 * 1024) == "12.5 MiB");
  CHECK(FormatBytes(uint64_t{3} << 30) == "3.00 GiB");
}

}  // namespace
}  // namespace odmoe
