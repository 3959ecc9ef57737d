// Gated DeltaNet gives a sequence the same outputs and state however its
// rows are split into calls (a prefill in chunks of any size, a decode one
// row at a time): on every backend, bit for bit.
#include <vector>

#include "backends/backend_registry.h"
#include "catch2/catch.hpp"
#include "op_cases.h"

namespace odmoe::test {
namespace {

TEST_CASE("GatedDeltaNet: chunked and one-row recurrences give the same bits", "[backend]") {
  for (const std::string& name : EveryBackendName()) {
    auto be = CreateBackend(name);
    if (!be.ok()) continue;  // a GPU family without hardware here
    for (const bool tiled : {false, true}) {
      const DeltaInputs in = MakeDeltaInputs(2, 4, 16, 9, tiled, 901);
      const int64_t all[] = {9}, ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, mixed[] = {4, 1, 3, 1};
      const std::vector<float> whole = RunDeltaNet(**be, in, true, all);
      INFO(name << " tiled " << tiled);
      CHECK(RunDeltaNet(**be, in, true, ones) == whole);
      CHECK(RunDeltaNet(**be, in, true, mixed) == whole);
      // A different start state changes the result (the state is read).
      CHECK(RunDeltaNet(**be, in, false, all) != whole);
    }
  }
}

}  // namespace
}  // namespace odmoe::test
