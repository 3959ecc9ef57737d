#include "cluster/trace.h"

#include <algorithm>
#include <chrono>

namespace odmoe {

int64_t TraceRecorder::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void TraceRecorder::Start(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
  events_.reserve(std::min<size_t>(capacity, 1 << 16));
  capacity_ = capacity;
  dropped_ = 0;
  enabled_.store(true);
}

std::vector<TraceEvent> TraceRecorder::Stop(uint64_t* dropped) {
  enabled_.store(false);
  std::lock_guard<std::mutex> lock(mu_);
  if (dropped) *dropped = dropped_;
  std::vector<TraceEvent> out;
  out.swap(events_);
  return out;
}

void TraceRecorder::Record(TraceEvent event) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

TraceSpan::TraceSpan(TraceRecorder* recorder, const char* name, const char* lane,
                     uint64_t request, uint32_t token, int32_t layer, int32_t expert)
    : recorder_(recorder && recorder->enabled() ? recorder : nullptr) {
  if (!recorder_) return;
  event_.name = name;
  event_.lane = lane;
  event_.request = request;
  event_.token = token;
  event_.layer = layer;
  event_.expert = expert;
  event_.start_us = TraceRecorder::NowUs();
}

TraceSpan::~TraceSpan() {
  if (!recorder_) return;
  event_.duration_us = TraceRecorder::NowUs() - event_.start_us;
  recorder_->Record(std::move(event_));
}

}  // namespace odmoe
