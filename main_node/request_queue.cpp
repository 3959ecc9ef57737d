#include "main_node/request_queue.h"

#include <chrono>

#include "absl/strings/str_format.h"

namespace odmoe {

RequestQueue::Turn::~Turn() {
  if (queue_) queue_->Leave();
}

absl::StatusOr<RequestQueue::Turn> RequestQueue::Enter(const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool must_wait = running_ >= max_running_ || serving_ != next_ticket_;
  if (must_wait && waiting_ >= max_waiting_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the server is busy: %d requests are already waiting (the queue holds %d); retry later",
        waiting_, max_waiting_));
  }
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  while (serving_ != ticket || running_ >= max_running_) {
    if (cancelled && cancelled()) {
      // Give up the place in line: the tickets behind move up by skipping ours.
      --waiting_;
      skipped_.push_back(ticket);
      AdvanceLocked();
      cv_.notify_all();
      return absl::CancelledError("the client went away while the request was queued");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
  --waiting_;
  ++running_;
  ++serving_;  // the next in line may go too, if there is room
  AdvanceLocked();
  cv_.notify_all();
  return Turn(this);
}

void RequestQueue::Leave() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
  cv_.notify_all();
}

void RequestQueue::AdvanceLocked() {
  // Tickets whose holders gave up are passed over.
  bool moved = true;
  while (moved) {
    moved = false;
    for (auto it = skipped_.begin(); it != skipped_.end(); ++it) {
      if (*it == serving_) {
        ++serving_;
        skipped_.erase(it);
        moved = true;
        break;
      }
    }
  }
}

int RequestQueue::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

int RequestQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

}  // namespace odmoe
