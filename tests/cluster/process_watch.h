// What a test's own process costs while an attack runs on the nodes it hosts
// (the in-process cluster's nodes run in the test process): its threads, its
// resident memory at the peak of a piece of work, its CPU time.
//
//   const uint64_t growth = PeakRssGrowth([&] { ... twelve calls at once ... });
//   CHECK(growth < 768 * kMiB);
//   CHECK(ThreadCount() < threads_before + 64);
#pragma once

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <thread>

#include "util/process_memory.h"

namespace odmoe::test {

inline constexpr uint64_t kWatchMiB = 1u << 20;

/// This process's threads now (/proc/self/task).
inline int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

/// How far the resident memory rose above its level before `fn`, at the
/// peak while `fn` ran: sampled every millisecond, and the kernel's peak
/// (VmHWM, reset first through /proc/self/clear_refs where that is allowed).
inline uint64_t PeakRssGrowth(const std::function<void()>& fn) {
  const uint64_t before = ReadProcessMemory().rss_bytes;
  const bool hwm_reset = static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5");
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      const uint64_t now = ReadProcessMemory().rss_bytes;
      if (now > peak.load()) peak = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  fn();
  done = true;
  sampler.join();
  uint64_t top = peak.load();
  if (hwm_reset) top = std::max(top, ReadProcessMemory().peak_rss_bytes);
  return top > before ? top - before : 0;
}

/// The peak thread count while `fn` runs (sampled every 5 ms).
inline int PeakThreads(const std::function<void()>& fn) {
  std::atomic<bool> done{false};
  std::atomic<int> peak{ThreadCount()};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak.load(), ThreadCount());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  fn();
  done = true;
  sampler.join();
  return peak.load() - 1;  // not the sampler
}

}  // namespace odmoe::test
