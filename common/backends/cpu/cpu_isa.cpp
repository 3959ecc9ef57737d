#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "util/logging.h"

namespace odmoe {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "unknown";
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

namespace {

CpuIsa Detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) return CpuIsa::kAvx512Vnni;
  if (avx512) return CpuIsa::kAvx512;
  if (avx2) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kScalar;
}

bool DetectSplitAvx512() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0) return false;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  unsigned family = (eax >> 8) & 0xfu;
  if (family == 0xfu) family += (eax >> 20) & 0xffu;
  return family == 0x19u;
#else
  return false;
#endif
}

}  // namespace

bool CpuSplitsAvx512() {
  static const bool split = DetectSplitAvx512();
  return split;
}

bool CpuReadsOneStreamBest() { return CpuSplitsAvx512(); }

CpuIsa DetectedCpuIsa() {
  static const CpuIsa detected = Detect();
  return detected;
}

std::vector<CpuIsa> SupportedCpuIsas() {
  std::vector<CpuIsa> out;
  for (int i = 0; i <= static_cast<int>(DetectedCpuIsa()); ++i)
    out.push_back(static_cast<CpuIsa>(i));
  return out;
}

CpuIsa DefaultCpuIsa() {
  static const CpuIsa chosen = [] {
    const CpuIsa detected = DetectedCpuIsa();
    const char* env = std::getenv("ODMOE_CPU_ISA");
    if (env == nullptr || *env == '\0') return detected;
    const std::optional<CpuIsa> wanted = ParseCpuIsa(env);
    if (!wanted) {
      ODMOE_LOG_WARN("ODMOE_CPU_ISA='{}' is not one of scalar, avx2, avx512, avx512vnni; using {}",
                     env, CpuIsaName(detected));
      return detected;
    }
    if (*wanted > detected) {
      ODMOE_LOG_WARN("ODMOE_CPU_ISA='{}' is not supported by this CPU; using {}", env,
                     CpuIsaName(detected));
      return detected;
    }
    return *wanted;
  }();
  return chosen;
}

}  // namespace odmoe
