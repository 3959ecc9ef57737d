// This process's resident memory, from /proc/self/status (Linux): now and at
// its peak (VmRSS, VmHWM; zero where the file cannot be read), and the CPU
// time it has used (getrusage).
//
//   ProcessMemory m = ReadProcessMemory();  m.peak_rss_bytes ...
#pragma once

#include <cstdint>

namespace odmoe {

struct ProcessMemory {
  uint64_t rss_bytes = 0;
  uint64_t peak_rss_bytes = 0;
};

ProcessMemory ReadProcessMemory();

/// CPU time this process has used (user + system, all threads), seconds.
double ProcessCpuSeconds();

}  // namespace odmoe
