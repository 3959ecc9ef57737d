// When to restart a process that died, and when to give up on it: the
// policy of odmoe-cluster's supervisor (tools/odmoe_cluster.cpp), kept apart
// so that it can be tested with a made-up clock.
//
// The delay before a restart starts at `first_delay` and doubles with every
// death, up to `max_delay`; a process that stayed up `stable_after` starts
// over at `first_delay`. A process already restarted `max_restarts` times
// within the last `window` is given up on (it crashes at start, say): Died
// answers nullopt and the caller leaves it down and says so, instead of
// restarting it in a hot loop.
//
//   RestartPolicy policy(RestartLimits{});
//   policy.Started(now);                       // first start
//   ...it dies...
//   if (std::optional<Duration> wait = policy.Died(now)) {
//     sleep(*wait); start it; policy.Restarted(now);
//   } else { report "gave up" }
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

namespace odmoe {

struct RestartLimits {
  using Duration = std::chrono::steady_clock::duration;
  Duration first_delay = std::chrono::milliseconds(500);
  Duration max_delay = std::chrono::seconds(10);
  Duration stable_after = std::chrono::seconds(30);  // up this long: back to first_delay
  int max_restarts = 5;                              // within `window`; 0 = never restart
  Duration window = std::chrono::seconds(60);
};

class RestartPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  using Duration = Clock::duration;

  explicit RestartPolicy(RestartLimits limits) : limits_(limits), next_delay_(limits.first_delay) {}

  /// The process was started (not a restart: the first start, or one by
  /// someone else that the supervisor adopts). Forgets earlier restarts.
  void Started(Clock::time_point now) {
    restarts_.clear();
    next_delay_ = limits_.first_delay;
    last_start_ = now;
  }
  /// The process died at `now`: how long to wait before restarting it, or
  /// nullopt when it was restarted max_restarts times within the window.
  std::optional<Duration> Died(Clock::time_point now) {
    if (last_start_ && now - *last_start_ >= limits_.stable_after) {
      next_delay_ = limits_.first_delay;
    }
    while (!restarts_.empty() && now - restarts_.front() > limits_.window) restarts_.pop_front();
    if (static_cast<int>(restarts_.size()) >= limits_.max_restarts) return std::nullopt;
    const Duration delay = next_delay_;
    next_delay_ = std::min<Duration>(next_delay_ * 2, limits_.max_delay);
    return delay;
  }
  /// It was restarted at `now` (after Died answered a delay).
  void Restarted(Clock::time_point now) {
    restarts_.push_back(now);
    last_start_ = now;
  }
  /// Restarts within the window that ends at `now`.
  int restarts(Clock::time_point now) const {
    return static_cast<int>(std::count_if(restarts_.begin(), restarts_.end(),
                                          [&](auto t) { return now - t <= limits_.window; }));
  }
  const RestartLimits& limits() const { return limits_; }

 private:
  RestartLimits limits_;
  Duration next_delay_;
  std::optional<Clock::time_point> last_start_;
  std::deque<Clock::time_point> restarts_;
};

}  // namespace odmoe
