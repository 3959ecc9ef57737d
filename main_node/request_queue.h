// Fair admission of completion requests: the main node runs up to
// `max_running` generations at once (batched together, main.max_running);
// the others wait in arrival order. Past `max_waiting` waiting requests a new
// one is refused at once (RESOURCE_EXHAUSTED, the HTTP API's 429) instead of
// queueing forever.
//
//   RequestQueue queue(/*max_waiting=*/16, /*max_running=*/4);
//   ODMOE_ASSIGN_OR_RETURN(RequestQueue::Turn turn, queue.Enter(cancelled));
//   ... generate ...                      // turn releases the slot when destroyed
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace odmoe {

class RequestQueue {
 public:
  explicit RequestQueue(int max_waiting, int max_running = 1)
      : max_waiting_(max_waiting), max_running_(max_running < 1 ? 1 : max_running) {}

  /// Holds the right to run; the next request in line goes when it is destroyed.
  class Turn {
   public:
    Turn(Turn&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Turn& operator=(Turn&&) = delete;
    ~Turn();

   private:
    friend class RequestQueue;
    explicit Turn(RequestQueue* queue) : queue_(queue) {}
    RequestQueue* queue_;
  };

  /// Waits for this request's turn (first come, first served): a place among
  /// the max_running. RESOURCE_EXHAUSTED when max_waiting requests already
  /// wait; CANCELLED when `cancelled` (polled while waiting) turns true first.
  absl::StatusOr<Turn> Enter(const std::function<bool()>& cancelled = {});

  int running() const;
  int waiting() const;

 private:
  void Leave();
  void AdvanceLocked();

  const int max_waiting_;
  const int max_running_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // handed to the next arrival
  uint64_t serving_ = 0;      // the ticket whose turn it is
  int running_ = 0;           // turns held
  int waiting_ = 0;
  std::vector<uint64_t> skipped_;  // tickets given up while waiting
};

}  // namespace odmoe
