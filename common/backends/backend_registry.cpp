#include "backend_registry.h"

#include <charconv>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cpu/cpu_backend.h"
#include "util/logging.h"

namespace odmoe {

#if ODMOE_HAVE_CUDA
/// The CUDA family ("cuda", "cuda:N"), defined by the CUDA backend.
BackendFactory MakeCudaBackendFactory();
#endif

namespace {

// Upper bound on "cpu:N": a guard against typos such as "cpu:20000".
constexpr int kMaxCpuThreads = 1024;

absl::StatusOr<std::unique_ptr<Backend>> CreateCpu(std::string_view arg) {
  int threads = 0;  // one per hardware thread
  if (!arg.empty()) {
    const char* end = arg.data() + arg.size();
    const auto [ptr, ec] = std::from_chars(arg.data(), end, threads);
    if (ec != std::errc() || ptr != end || threads < 1 || threads > kMaxCpuThreads) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad CPU backend 'cpu:%s': expected a thread count from 1 to %d", arg, kMaxCpuThreads));
    }
  }
  return std::make_unique<CpuBackend>(threads);
}

BackendFactory CpuFactory() {
  return {"cpu", &CreateCpu, [] { return std::vector<std::string>{"cpu"}; }, {}};
}

struct Registry {
  std::mutex mu;
  std::vector<BackendFactory> families;
};

void AddLocked(Registry& r, BackendFactory factory) {
  for (BackendFactory& f : r.families) {
    if (f.family == factory.family) {
      f = std::move(factory);
      return;
    }
  }
  r.families.push_back(std::move(factory));
}

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry();  // never destroyed: usable during static teardown
    AddLocked(*r, CpuFactory());
#if ODMOE_HAVE_CUDA
    AddLocked(*r, MakeCudaBackendFactory());
#endif
    return r;
  }();
  return *registry;
}

/// A copy of the families, so that factories run without the lock held.
std::vector<BackendFactory> Families() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.families;
}

}  // namespace

void RegisterBackend(BackendFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  AddLocked(r, std::move(factory));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(std::string_view name) {
  const size_t colon = name.find(':');
  const std::string_view family = name.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? "" : name.substr(colon + 1);
  for (const BackendFactory& f : Families()) {
    if (f.family == family) {
      if (colon != std::string_view::npos && arg.empty()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("bad backend name '%s': nothing after ':'", name));
      }
      return f.create(arg);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown backend '%s': compiled-in families are %s", name,
                      absl::StrJoin(CompiledBackendFamilies(), ", ")));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackendOrFallback(std::string_view name,
                                                                 std::string_view fallback) {
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateBackend(name);
  if (be.ok() || fallback.empty() || be.status().code() != absl::StatusCode::kUnavailable) {
    return be;
  }
  ODMOE_LOG_WARN("backend '{}' is unavailable, using '{}' instead: {}", name, fallback,
                 be.status().message());
  return CreateBackend(fallback);
}

absl::StatusOr<std::unique_ptr<SlotDevice>> CreateSlotDevice(Backend& backend) {
  if (backend.host_memory()) return std::unique_ptr<SlotDevice>();
  const std::string name = backend.name();
  const std::string family = name.substr(0, name.find(':'));
  for (const BackendFactory& f : Families()) {
    if (f.family == family && f.slot_device) return f.slot_device(backend);
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "backend '%s' keeps its memory off the host but offers no expert-slot device; "
      "a worker cannot load experts through it", name));
}

std::vector<std::string> AvailableBackends() {
  std::vector<std::string> out;
  for (const BackendFactory& f : Families()) {
    for (std::string& n : f.available()) out.push_back(std::move(n));
  }
  return out;
}

std::vector<std::string> CompiledBackendFamilies() {
  std::vector<std::string> out;
  for (const BackendFactory& f : Families()) out.push_back(f.family);
  return out;
}

}  // namespace odmoe
