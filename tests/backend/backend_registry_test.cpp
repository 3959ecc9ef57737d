// The backend registry: names, thread counts and clear errors for bad names.
#include "backends/backend_registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "cpu_backend.h"

namespace odmoe {
namespace {

TEST_CASE("registry creates cpu and cpu:N", "[backend][registry]") {
  auto cpu = CreateBackend("cpu");
  REQUIRE(cpu.ok());
  CHECK((*cpu)->name() == "cpu");
  CHECK((*cpu)->host_memory());
  auto three = CreateBackend("cpu:3");
  REQUIRE(three.ok());
  auto* cpu3 = dynamic_cast<CpuBackend*>(three->get());
  REQUIRE(cpu3 != nullptr);
  CHECK(cpu3->threads() == 3);
}

TEST_CASE("registry lists cpu as available and compiled", "[backend][registry]") {
  const std::vector<std::string> avail = AvailableBackends();
  CHECK(std::find(avail.begin(), avail.end(), "cpu") != avail.end());
  const std::vector<std::string> families = CompiledBackendFamilies();
  CHECK(std::find(families.begin(), families.end(), "cpu") != families.end());
}

TEST_CASE("registry rejects bad names with clear errors", "[backend][registry]") {
  struct Bad {
    const char* name;
    const char* mentions;
  };
  for (const Bad& b : {Bad{"gpu", "unknown backend 'gpu'"}, Bad{"cpu:x", "thread count"},
                       Bad{"cpu:-1", "thread count"}, Bad{"cpu:0", "thread count"},
                       Bad{"cpu:2x", "thread count"}, Bad{"cpu:99999", "thread count"},
                       Bad{"cpu:", "nothing after ':'"}, Bad{"", "unknown backend"}}) {
    INFO(b.name);
    auto be = CreateBackend(b.name);
    REQUIRE_FALSE(be.ok());
    CHECK(be.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(be.status().message()).find(b.mentions) != std::string::npos);
  }
}

TEST_CASE("registry accepts an extra family", "[backend][registry]") {
  RegisterBackend({"testfam",
                   [](std::string_view arg) -> absl::StatusOr<std::unique_ptr<Backend>> {
                     if (arg != "7") return absl::UnavailableError("no such test device");
                     return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(1));
                   },
                   [] { return std::vector<std::string>{"testfam:7"}; }, {}});
  CHECK(CreateBackend("testfam:7").ok());
  CHECK(CreateBackend("testfam:1").status().code() == absl::StatusCode::kUnavailable);
  const std::vector<std::string> avail = AvailableBackends();
  CHECK(std::find(avail.begin(), avail.end(), "testfam:7") != avail.end());
}

TEST_CASE("registry falls back only when the hardware is missing", "[backend][registry]") {
  RegisterBackend({"nohw",
                   [](std::string_view) -> absl::StatusOr<std::unique_ptr<Backend>> {
                     return absl::UnavailableError("no such device here");
                   },
                   [] { return std::vector<std::string>{}; }, {}});
  auto fell_back = CreateBackendOrFallback("nohw:0", "cpu:2");
  REQUIRE(fell_back.ok());
  CHECK((*fell_back)->name() == "cpu");
  // No fallback allowed: the UNAVAILABLE error itself.
  CHECK(CreateBackendOrFallback("nohw:0", "").status().code() == absl::StatusCode::kUnavailable);
  // A malformed or unknown name is never papered over.
  CHECK(CreateBackendOrFallback("cpu:x", "cpu").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(CreateBackendOrFallback("gpu", "cpu").status().code() ==
        absl::StatusCode::kInvalidArgument);
  // A working backend is used as is.
  auto cpu3 = CreateBackendOrFallback("cpu:3", "cpu:1");
  REQUIRE(cpu3.ok());
  CHECK(dynamic_cast<CpuBackend*>(cpu3->get())->threads() == 3);
}

}  // namespace
}  // namespace odmoe
