#include "util/thread_pool.h"

#include <algorithm>

namespace odmoe {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = std::min<int64_t>(threads(), (n + grain - 1) / grain);
  if (max_chunks <= 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = (n + max_chunks - 1) / max_chunks;
    chunks_ = static_cast<int>((n + chunk_ - 1) / chunk_);
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  RunChunks(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();
    RunChunks(index + 1);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::RunChunks(int participant) {
  // Chunk c goes to participant c % threads(): a fixed assignment, so every
  // chunk runs exactly once and the caller never waits on an unclaimed chunk.
  for (int c = participant; c < chunks_; c += threads()) {
    const int64_t begin = c * chunk_;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

}  // namespace odmoe
