// Mamba-2's scan gives a sequence the same outputs and state however its
// rows are split into calls (a prefill in chunks of any size, a decode one
// row at a time): on every backend, bit for bit.
#include <vector>

#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "op_cases.h"

namespace odmoe::test {
namespace {

TEST_CASE("Mamba2Scan: chunked and one-row scans give the same bits", "[backend]") {
  for (const std::string& name : EveryBackendName()) {
    auto be = CreateBackend(name);
    if (!be.ok()) continue;  // a GPU family without hardware here
    for (const int groups : {1, 2}) {
      const Mamba2Inputs in = MakeMamba2Inputs(4, 8, groups, 16, 9, 911);
      const int64_t all[] = {9}, ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, mixed[] = {4, 1, 3, 1};
      const std::vector<float> whole = RunMamba2Scan(**be, in, true, all);
      INFO(name << " groups " << groups);
      CHECK(RunMamba2Scan(**be, in, true, ones) == whole);
      CHECK(RunMamba2Scan(**be, in, true, mixed) == whole);
      CHECK(RunMamba2Scan(**be, in, false, all) != whole);  // the state is read
    }
  }
}

}  // namespace
}  // namespace odmoe::test
