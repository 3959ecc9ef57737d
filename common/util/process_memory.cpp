#include "util/process_memory.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace odmoe {

ProcessMemory ReadProcessMemory() {
  ProcessMemory m;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kib) == 1) m.rss_bytes = kib * 1024;
    if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) m.peak_rss_bytes = kib * 1024;
  }
  std::fclose(f);
  return m;
}

double ProcessCpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace odmoe
