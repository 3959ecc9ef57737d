// A fixed-size thread pool for data-parallel loops (the CPU backend's
// kernels). The calling thread takes part in the work, so a pool of N threads
// uses N-1 workers plus the caller.
//
//   ThreadPool pool(2);
//   pool.ParallelFor(rows, /*grain=*/16, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) y[r] = Dot(w.Row(r), x);
//   });
//
// ParallelFor splits [0, n) into at most threads() contiguous chunks of at
// least `grain` items (the same chunks for the same n, grain and threads());
// it returns when every chunk is done. Calls from several threads at once are
// serialised. Not reentrant (do not call ParallelFor from inside a task).
//
// Waiting. A decode step is hundreds of calls of tens of microseconds each,
// and waking a sleeping thread takes about as long (40 us a call on a 2-core
// VM with sleeping workers alone), so:
// - chunks are claimed, not assigned: whichever participant comes first takes
//   the next chunk, and the caller never waits for a worker to wake up; it
//   waits only for chunks that a worker has started;
// - a worker that has run out of chunks polls for the next call for `spin`
//   (default 100 us; the first part with the CPU's pause instruction, the rest
//   yielding the core to any other runnable thread) before it sleeps, and the
//   caller polls the same way for the last chunks before it sleeps.
// A spin of zero makes every wait sleep at once (the pool of earlier
// versions). ODMOE_POOL_SPIN_US, when set, overrides the default.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace odmoe {

class ThreadPool {
 public:
  /// `threads` <= 0 means std::thread::hardware_concurrency(). `spin` < 0
  /// means the default (ODMOE_POOL_SPIN_US, else 100 us).
  explicit ThreadPool(int threads, std::chrono::microseconds spin = std::chrono::microseconds(-1));
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  std::chrono::microseconds spin() const { return spin_; }

  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  /// The default spin: ODMOE_POOL_SPIN_US when it is a number in [0, 1000000],
  /// else 100 us.
  static std::chrono::microseconds DefaultSpin();

 private:
  void WorkerLoop();
  // Claims and runs chunks of call `call` until it has none left (or has
  // been replaced by a later call).
  void RunClaimedChunks(uint64_t call);

  std::vector<std::thread> workers_;
  const std::chrono::microseconds spin_;
  std::mutex call_mu_;  // serialises ParallelFor callers

  // The current call's claim word: call number (high 32 bits), its chunks
  // (16 bits) and the next unclaimed chunk (low 16 bits). A claim is a
  // compare-exchange that keeps the call number, so a worker that wakes after
  // its call has finished claims nothing of the next one.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> chunks_done_{0};
  std::atomic<bool> stop_{false};
  // Fields of the current call: written before claim_ publishes the call,
  // stable until its every chunk is done.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int chunks_ = 0;

  // Sleeping: workers wait on wake_ for a new call, the caller on done_ for
  // the last chunk. Every change a sleeper waits for is followed by a lock
  // and unlock of mu_ before the notify, so no wake-up is lost.
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace odmoe
