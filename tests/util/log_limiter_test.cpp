// LogLimiter: a burst per window, then silence counted, then a line that
// says how many were left out.
#include "util/log_limiter.h"

#include <catch2/catch.hpp>

namespace odmoe {
namespace {

TEST_CASE("log limiter: a burst per window, the rest counted", "[util]") {
  auto t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  LogLimiter limiter(3, std::chrono::seconds(10), [&t] { return t; });
  uint64_t dropped = 99;
  CHECK(limiter.Allow(&dropped));
  CHECK(dropped == 0);
  CHECK(limiter.Allow());
  CHECK(limiter.Allow());
  for (int i = 0; i < 1000; ++i) CHECK_FALSE(limiter.Allow());  // a flood: nothing written
  t += std::chrono::seconds(9);
  CHECK_FALSE(limiter.Allow());  // still the same window
  t += std::chrono::seconds(2);
  REQUIRE(limiter.Allow(&dropped));  // a new window: the next line says how many
  CHECK(dropped == 1001);
  CHECK(limiter.Allow(&dropped));
  CHECK(dropped == 0);
}

}  // namespace
}  // namespace odmoe
