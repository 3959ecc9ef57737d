// EMULATION of link latency where the kernel cannot (no tc netem): what a
// stream reader receives is handled `delay` after it arrived, in arrival
// order, on a thread of the delay line's own, so a burst of messages is not
// delayed more than one. With a zero delay the handler runs at once on the
// caller's thread (no thread is started). Set by `wire.emulated_delay` in
// the topology; every node delays what it receives (a one-way latency).
//
//   DelayLine line(absl::Microseconds(200));
//   while (stream->Read(&msg)) line.Push([&core, msg] { core.Handle(msg); });
//   // destroying the line drops what is still in flight (the link closed)
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/time/time.h"

namespace odmoe {

class DelayLine {
 public:
  explicit DelayLine(absl::Duration delay);
  ~DelayLine();
  DelayLine(const DelayLine&) = delete;
  DelayLine& operator=(const DelayLine&) = delete;

  void Push(std::function<void()> handle);
  /// Whether messages are delayed at all (callers may skip copying them when not).
  bool active() const { return thread_.joinable(); }

 private:
  void Loop();
  const std::chrono::steady_clock::duration delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::function<void()>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace odmoe
