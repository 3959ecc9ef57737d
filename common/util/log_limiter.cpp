#include "util/log_limiter.h"

namespace odmoe {

LogLimiter::LogLimiter(int burst, std::chrono::steady_clock::duration window, Clock clock)
    : burst_(burst), window_(window), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

bool LogLimiter::Allow(uint64_t* suppressed) {
  const auto now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (in_window_ == 0 || now - window_start_ >= window_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  if (suppressed != nullptr) *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

}  // namespace odmoe
