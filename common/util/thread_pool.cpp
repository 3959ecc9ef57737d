#include "util/thread_pool.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace odmoe {
namespace {

using Clock = std::chrono::steady_clock;

// The claim word: call number (bits 32-63), chunks of the call (16-31), next
// unclaimed chunk (0-15).
constexpr int kCallShift = 32;
constexpr int kChunksShift = 16;
constexpr uint64_t kFieldMask = 0xffff;
constexpr int64_t kMaxChunks = 0xffff;

uint64_t CallOf(uint64_t claim) { return claim >> kCallShift; }
int ChunksOf(uint64_t claim) { return static_cast<int>((claim >> kChunksShift) & kFieldMask); }
int NextOf(uint64_t claim) { return static_cast<int>(claim & kFieldMask); }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` for up to `spin`: pause instructions for the first few
// microseconds, then yielding the core to other runnable threads. True once
// `ready` holds; false when the time is up (the caller then sleeps).
template <class Ready>
bool SpinUntil(std::chrono::microseconds spin, const Ready& ready) {
  if (ready()) return true;
  if (spin.count() <= 0) return false;
  constexpr auto kPausing = std::chrono::microseconds(5);
  const Clock::time_point start = Clock::now();
  for (uint32_t i = 1;; ++i) {
    if (ready()) return true;
    if (i % 32 == 0) {
      const auto waited = Clock::now() - start;
      if (waited >= spin) return ready();
      if (waited >= kPausing) {
        std::this_thread::yield();
        continue;
      }
    }
    CpuRelax();
  }
}

}  // namespace

std::chrono::microseconds ThreadPool::DefaultSpin() {
  constexpr std::chrono::microseconds kDefault(100);
  const char* v = std::getenv("ODMOE_POOL_SPIN_US");
  int64_t us = 0;
  if (v == nullptr || !absl::SimpleAtoi(v, &us) || us < 0 || us > 1000000) return kDefault;
  return std::chrono::microseconds(us);
}

ThreadPool::ThreadPool(int threads, std::chrono::microseconds spin)
    : spin_(spin.count() < 0 ? DefaultSpin() : spin) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, kMaxChunks));
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  { std::lock_guard<std::mutex> lock(mu_); }
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
  fn_ = &fn;
  n_ = n;
  chunk_ = (n + max_chunks - 1) / max_chunks;
  chunks_ = static_cast<int>((n + chunk_ - 1) / chunk_);
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint64_t call = (CallOf(claim_.load(std::memory_order_relaxed)) + 1) & 0xffffffffu;
  claim_.store(call << kCallShift | static_cast<uint64_t>(chunks_) << kChunksShift,
               std::memory_order_release);
  { std::lock_guard<std::mutex> lock(mu_); }
  wake_.notify_all();
  RunClaimedChunks(call);
  const auto all_done = [this] { return chunks_done_.load(std::memory_order_acquire) == chunks_; };
  if (!SpinUntil(spin_, all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, all_done);
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = CallOf(claim_.load(std::memory_order_acquire));
  const auto fresh = [&] {
    return stop_.load(std::memory_order_acquire) ||
           CallOf(claim_.load(std::memory_order_acquire)) != seen;
  };
  for (;;) {
    if (!SpinUntil(spin_, fresh)) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, fresh);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = CallOf(claim_.load(std::memory_order_acquire));
    RunClaimedChunks(seen);
  }
}

void ThreadPool::RunClaimedChunks(uint64_t call) {
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (CallOf(c) == call && NextOf(c) < ChunksOf(c)) {
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // c now holds the current word
    }
    // Chunk NextOf(c) is ours: the call cannot end before it is done, so its
    // fields stay as the caller wrote them.
    const int64_t begin = NextOf(c) * chunk_;
    (*fn_)(begin, std::min(n_, begin + chunk_));
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == ChunksOf(c)) {
      { std::lock_guard<std::mutex> lock(mu_); }
      done_.notify_one();
    }
    c = claim_.load(std::memory_order_acquire);
  }
}

}  // namespace odmoe
