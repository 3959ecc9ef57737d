#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "main_node/request_queue.h"

namespace odmoe {

TEST_CASE("request queue: first come, first served, and full means busy", "[cluster][tsan]") {
  RequestQueue queue(/*max_waiting=*/8);
  std::mutex mu;
  std::vector<int> order;
  std::optional<RequestQueue::Turn> first(queue.Enter().value());
  std::vector<std::thread> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.emplace_back([&, i] {
      auto turn = queue.Enter();
      REQUIRE(turn.ok());
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
    // Let each arrive before the next.
    while (queue.waiting() != i + 1) std::this_thread::yield();
  }
  CHECK(queue.running() == 1);
  first.reset();
  for (std::thread& t : waiters) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(queue.running() == 0);
  CHECK(queue.waiting() == 0);
}

TEST_CASE("request queue: over the limit is refused, a cancelled waiter leaves",
          "[cluster][tsan]") {
  RequestQueue queue(/*max_waiting=*/1);
  std::optional<RequestQueue::Turn> running(queue.Enter().value());
  std::atomic<bool> give_up{false};
  absl::Status waiter_status;
  std::thread waiter([&] {
    waiter_status = queue.Enter([&] { return give_up.load(); }).status();
  });
  while (queue.waiting() != 1) std::this_thread::yield();
  auto refused = queue.Enter();
  CHECK(absl::IsResourceExhausted(refused.status()));
  CHECK(refused.status().message().find("busy") != std::string::npos);
  give_up = true;
  waiter.join();
  CHECK(absl::IsCancelled(waiter_status));
  running.reset();
  // The cancelled ticket is skipped: the next arrival runs at once.
  auto next = queue.Enter();
  CHECK(next.ok());
}

}  // namespace odmoe

namespace odmoe {

TEST_CASE("request queue: max_running turns at once, the next in line when one leaves",
          "[cluster][batching]") {
  RequestQueue queue(/*max_waiting=*/8, /*max_running=*/2);
  std::optional<RequestQueue::Turn> a(queue.Enter().value());
  std::optional<RequestQueue::Turn> b(queue.Enter().value());  // no wait: room for two
  CHECK(queue.running() == 2);
  std::atomic<bool> third_in{false};
  std::thread third([&] {
    auto turn = queue.Enter();
    REQUIRE(turn.ok());
    third_in = true;
  });
  while (queue.waiting() != 1) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(!third_in.load());  // both places taken
  a.reset();
  third.join();
  CHECK(third_in.load());
  b.reset();
  CHECK(queue.running() == 0);
  CHECK(queue.waiting() == 0);
}

}  // namespace odmoe
