// ThreadPool: every index runs exactly once, chunks respect the grain, and
// the pool survives many calls and concurrent callers, with its workers
// sleeping at once or polling first, and workers that come late.
#include "util/thread_pool.h"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace odmoe {
namespace {

using std::chrono::microseconds;

TEST_CASE("ParallelFor covers every index exactly once", "[util][thread_pool]") {
  for (int threads : {1, 2, 3, 5}) {
    for (int spin : {0, 100}) {
      ThreadPool pool(threads, microseconds(spin));
      CHECK(pool.spin() == microseconds(spin));
      CHECK(pool.threads() == threads);
      for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
        for (int64_t grain : {1, 3, 64}) {
          std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
          std::atomic<int> chunks{0}, empty_chunks{0};
          pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
            // Catch2's assertions are not thread-safe: counted here, checked below.
            if (b >= e) empty_chunks++;
            chunks++;
            for (int64_t i = b; i < e; ++i) hits[i]++;
          });
          CHECK(empty_chunks == 0);
          for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
          CHECK(chunks <= threads);
          if (n > 0) CHECK(chunks <= (n + grain - 1) / grain);
        }
      }
    }
  }
}

TEST_CASE("ParallelFor's chunks depend only on n, grain and the thread count",
          "[util][thread_pool]") {
  // The same boundaries whoever runs them and whether the workers poll or
  // sleep: kernels may rely on a chunk's rows being the same every call.
  for (int spin : {0, 50}) {
    ThreadPool pool(3, microseconds(spin));
    for (int rep = 0; rep < 50; ++rep) {
      std::mutex mu;
      std::set<std::pair<int64_t, int64_t>> seen;
      pool.ParallelFor(10, 2, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        seen.insert({b, e});
      });
      CHECK(seen == std::set<std::pair<int64_t, int64_t>>{{0, 4}, {4, 8}, {8, 10}});
    }
  }
}

TEST_CASE("ThreadPool: a worker still in a slow chunk or asleep loses nothing",
          "[util][thread_pool][tsan]") {
  // Back-to-back calls whose chunks take from nothing to a millisecond, so
  // that workers are caught spinning, asleep, mid-chunk and late for a call
  // that the caller already finished alone; every index exactly once each
  // call, and the pool then shuts down cleanly.
  for (int spin : {0, 20, 200}) {
    for (int threads : {2, 4}) {
      ThreadPool pool(threads, microseconds(spin));
      std::vector<std::atomic<int>> hits(64);
      for (int call = 0; call < 300; ++call) {
        for (auto& h : hits) h = 0;
        const int pause_us = (call % 7 == 0) ? 1000 : (call % 3 == 0 ? 30 : 0);
        pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
          if (pause_us > 0 && b == 0) std::this_thread::sleep_for(microseconds(pause_us));
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (const auto& h : hits) REQUIRE(h == 1);
        if (call % 50 == 0)
          std::this_thread::sleep_for(microseconds(spin + 300));  // let them sleep
      }
    }
  }
}

TEST_CASE("ParallelFor uses several threads and serialises concurrent callers",
          "[util][thread_pool][tsan]") {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 200; ++rep) {
      pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) { total += e - b; });
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  CHECK(total == 2 * 200 * 64);
}

TEST_CASE("ThreadPool(0) uses the hardware thread count", "[util][thread_pool]") {
  ThreadPool pool(0);
  CHECK(pool.threads() >= 1);
}

TEST_CASE("ThreadPool's default spin comes from ODMOE_POOL_SPIN_US when it is valid",
          "[util][thread_pool]") {
  const char* before = getenv("ODMOE_POOL_SPIN_US");
  const std::string saved = before ? before : "";
  unsetenv("ODMOE_POOL_SPIN_US");
  CHECK(ThreadPool::DefaultSpin() == microseconds(100));
  setenv("ODMOE_POOL_SPIN_US", "0", 1);
  CHECK(ThreadPool::DefaultSpin() == microseconds(0));
  CHECK(ThreadPool(2).spin() == microseconds(0));
  setenv("ODMOE_POOL_SPIN_US", "250", 1);
  CHECK(ThreadPool::DefaultSpin() == microseconds(250));
  for (const char* bad : {"", "-1", "12us", "abc", "2000000", "99999999999999999999"}) {
    setenv("ODMOE_POOL_SPIN_US", bad, 1);
    CHECK(ThreadPool::DefaultSpin() == microseconds(100));
  }
  CHECK(ThreadPool(2, microseconds(7)).spin() == microseconds(7));  // an explicit spin wins
  if (before) {
    setenv("ODMOE_POOL_SPIN_US", saved.c_str(), 1);
  } else {
    unsetenv("ODMOE_POOL_SPIN_US");
  }
}

}  // namespace
}  // namespace odmoe
