// Timestamps of what every node does, for timing diagrams (the paper's
// Fig. 2 drawn from our own cluster: main M_l, shadow S_l, each worker's
// expert load EL_l and compute EC_l). Off by default and then costs one
// atomic load per span; Node.Trace turns it on, and off again returning the
// spans. Times are wall-clock microseconds (system_clock) so spans of
// several machines can be put side by side; Node.Trace also answers the
// node's clock so the collector can estimate each node's offset.
//
//   TraceRecorder trace;
//   trace.Start(100000);
//   { TraceSpan span(&trace, "EL", "load", key.request, key.token, layer, expert); ... }
//   std::vector<TraceEvent> events = trace.Stop();
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace odmoe {

struct TraceEvent {
  std::string name;  // "M", "S", "EL", "EC", "wait", "align", ...
  std::string lane;  // a row of the diagram within the node ("compute", "load", ...)
  int64_t start_us = 0;
  int64_t duration_us = 0;
  uint64_t request = 0;
  uint32_t token = 0;  // 0 = prefill, n = decode iteration n
  int32_t layer = -1;
  int32_t expert = -1;
};

class TraceRecorder {
 public:
  /// Wall-clock microseconds since the epoch.
  static int64_t NowUs();

  /// Clears and records up to `capacity` spans (the rest are counted as dropped).
  void Start(size_t capacity);
  /// Stops recording; returns the spans (and how many were dropped).
  std::vector<TraceEvent> Stop(uint64_t* dropped = nullptr);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  void Record(TraceEvent event);

 private:
  std::atomic<bool> enabled_{false};
  std::mutex mu_;
  std::vector<TraceEvent> events_;
  size_t capacity_ = 0;
  uint64_t dropped_ = 0;
};

/// Records [construction, destruction) as one span when tracing is on
/// (recorder may be null).
class TraceSpan {
 public:
  TraceSpan(TraceRecorder* recorder, const char* name, const char* lane, uint64_t request,
            uint32_t token, int32_t layer, int32_t expert = -1);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder* recorder_;
  TraceEvent event_;
};

}  // namespace odmoe
