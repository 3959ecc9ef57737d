// A cap on how often one kind of log line is written: at most `burst` lines
// per `window`; the rest are counted, and the next line written says how
// many were left out. For lines an outsider can cause at will (refused
// calls), so that they cannot fill the disk or bury other lines.
//
//   static LogLimiter limiter(10, std::chrono::seconds(10));
//   uint64_t dropped = 0;
//   if (limiter.Allow(&dropped)) ODMOE_LOG_WARN("refused ... ({} more not logged)", dropped);
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace odmoe {

class LogLimiter {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  LogLimiter(int burst, std::chrono::steady_clock::duration window, Clock clock = {});

  /// Whether to write this line. When true, *suppressed (optional) is the
  /// number of lines left out since the last one written.
  bool Allow(uint64_t* suppressed = nullptr);

 private:
  const int burst_;
  const std::chrono::steady_clock::duration window_;
  Clock clock_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace odmoe
