// ThreadPool: every index runs exactly once, chunks respect the grain, and
// the pool survives many calls and concurrent callers.
#include "util/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace odmoe {
namespace {

TEST_CASE("ParallelFor covers every index exactly once", "[util][thread_pool]") {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    CHECK(pool.threads() == threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> chunks{0};
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
          CHECK(b < e);
          chunks++;
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
        CHECK(chunks <= threads);
        if (n > 0) CHECK(chunks <= (n + grain - 1) / grain);
      }
    }
  }
}

TEST_CASE("ParallelFor uses several threads and serialises concurrent callers",
          "[util][thread_pool]") {
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

}  // namespace
}  // namespace odmoe
