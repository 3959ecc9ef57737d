// A fixed-size thread pool for data-parallel loops (the CPU backend's
// kernels). The calling thread takes part in the work, so a pool of N threads
// uses N-1 workers plus the caller.
//
//   ThreadPool pool(2);
//   pool.ParallelFor(rows, /*grain=*/16, [&](int64_t begin, int64_t end) {
//     for (int64_t r = begin; r < end; ++r) y[r] = Dot(w.Row(r), x);
//   });
//
// ParallelFor splits [0, n) into contiguous chunks of at least `grain` items;
// it returns when every chunk is done. Calls from several threads at once are
// serialised. Not reentrant (do not call ParallelFor from inside a task).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace odmoe {

class ThreadPool {
 public:
  /// `threads` <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);
  void RunChunks(int participant);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serialises ParallelFor callers
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 0;
  int chunks_ = 0;
};

}  // namespace odmoe
