#include "util/restart_policy.h"

#include <catch2/catch.hpp>

namespace odmoe {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = RestartPolicy::Clock;

}  // namespace

TEST_CASE("restart policy: the delay doubles up to the cap, and resets after a stable run",
          "[util][supervisor]") {
  RestartLimits limits;
  limits.max_restarts = 100;
  limits.window = seconds(3600);
  RestartPolicy p(limits);
  Clock::time_point now{};
  p.Started(now);
  const milliseconds expected[] = {milliseconds(500),  milliseconds(1000), milliseconds(2000),
                                   milliseconds(4000), milliseconds(8000), milliseconds(10000),
                                   milliseconds(10000)};
  for (milliseconds want : expected) {
    now += seconds(1);  // dies a second after each start
    const std::optional<Clock::duration> wait = p.Died(now);
    REQUIRE(wait.has_value());
    CHECK(*wait == want);
    now += *wait;
    p.Restarted(now);
  }
  // Up for 30 s (stable_after): back to the first delay.
  now += seconds(30);
  const std::optional<Clock::duration> wait = p.Died(now);
  REQUIRE(wait.has_value());
  CHECK(*wait == milliseconds(500));
}

TEST_CASE("restart policy: a process that keeps crashing is given up on after the cap",
          "[util][supervisor]") {
  RestartLimits limits;  // 5 restarts within 60 s
  RestartPolicy p(limits);
  Clock::time_point now{};
  p.Started(now);
  int restarts = 0;
  while (std::optional<Clock::duration> wait = p.Died(now)) {
    now += *wait;
    p.Restarted(now);  // and it crashes at once
    ++restarts;
    REQUIRE(restarts <= limits.max_restarts);
  }
  CHECK(restarts == 5);
  CHECK(p.restarts(now) == 5);
  // 0.5 + 1 + 2 + 4 + 8 s of waiting: given up 15.5 s after the first crash.
  CHECK(now - Clock::time_point{} == milliseconds(15500));
}

TEST_CASE("restart policy: restarts older than the window no longer count", "[util][supervisor]") {
  RestartLimits limits;
  limits.max_restarts = 2;
  limits.window = seconds(60);
  limits.stable_after = seconds(3600);  // keep the delay growing
  RestartPolicy p(limits);
  Clock::time_point now{};
  p.Started(now);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(p.Died(now).has_value());
    p.Restarted(now);
  }
  CHECK(!p.Died(now).has_value());  // third death within the window
  now += seconds(61);
  CHECK(p.Died(now).has_value());  // the two restarts left the window
  // max_restarts 0: never restarted.
  limits.max_restarts = 0;
  RestartPolicy never(limits);
  never.Started(now);
  CHECK(!never.Died(now).has_value());
}

}  // namespace odmoe
