#include "cluster/delay_line.h"

namespace odmoe {

DelayLine::DelayLine(absl::Duration delay)
    : delay_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          absl::ToChronoNanoseconds(delay))) {
  if (delay_ > std::chrono::steady_clock::duration::zero()) {
    thread_ = std::thread([this] { Loop(); });
  }
}

DelayLine::~DelayLine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DelayLine::Push(std::function<void()> handle) {
  if (!thread_.joinable()) {
    handle();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::chrono::steady_clock::now() + delay_, std::move(handle));
  }
  cv_.notify_all();
}

void DelayLine::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto due = queue_.front().first;
    if (std::chrono::steady_clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    std::function<void()> handle = std::move(queue_.front().second);
    queue_.pop_front();
    lock.unlock();
    handle();
    lock.lock();
  }
}

}  // namespace odmoe
