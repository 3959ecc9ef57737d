// MoE-SpAc's utility estimation (worker_node/expert_utility.h): utilities move
// one level per cycle of `window` iterations, by how the experts' frequencies
// changed from the previous cycle, against boundaries that calibrate down.
#include "worker_node/expert_utility.h"

#include <catch2/catch.hpp>
#include <vector>

namespace odmoe::test {
namespace {

void Cycle(ExpertUtility& u, int layer, uint32_t* token, const std::vector<std::vector<int32_t>>& its) {
  for (const std::vector<int32_t>& experts : its) u.Observe(layer, {1, ++*token}, experts);
}

}  // namespace

TEST_CASE("expert utility: rises and falls with the frequency's change per cycle",
          "[worker][policy]") {
  ExpertUtility u(2, 8, {.window = 2, .levels = 4, .threshold = 1, .forgetting = 0.1});
  uint32_t token = 0;
  Cycle(u, 0, &token, {{3}, {3}});  // f3: 0 -> 2 (boundary floor(2/2) = 1)
  CHECK(u.utility(0, 3) == 1);
  CHECK(u.hot(0, 3));
  CHECK(u.utility(0, 5) == 0);
  Cycle(u, 0, &token, {{3}, {3}});  // no change: stays
  CHECK(u.utility(0, 3) == 1);
  Cycle(u, 0, &token, {{5}, {5}});  // 3 falls, 5 rises
  CHECK(u.utility(0, 3) == 0);
  CHECK(u.utility(0, 5) == 1);
  CHECK(u.Hot() == std::vector<std::pair<int, int>>{{0, 5}});
  // The other layer saw nothing.
  CHECK(u.utility(1, 5) == 0);
  // A cycle counts iterations, not hints: a repeated (corrected) hint of the
  // same iteration does not advance it.
  u.Observe(1, {1, 40}, std::vector<int32_t>{2});
  u.Observe(1, {1, 40}, std::vector<int32_t>{2});
  CHECK(u.utility(1, 2) == 0);  // one iteration of two
  u.Observe(1, {1, 41}, std::vector<int32_t>{2});
  CHECK(u.utility(1, 2) == 1);
  // Out-of-range input is ignored.
  u.Observe(7, {1, 1}, std::vector<int32_t>{1});
  u.Observe(0, {1, 99}, std::vector<int32_t>{-1, 8});
  CHECK(u.utility(7, 1) == 0);
  CHECK(u.utility(0, 8) == 0);
}

TEST_CASE("expert utility: boundaries calibrate down and utilities stop at the levels",
          "[worker][policy]") {
  ExpertUtility u(1, 4, {.window = 4, .levels = 2, .threshold = 2, .forgetting = 0.1});
  uint32_t token = 0;
  // Expert 1's frequency climbs by one each cycle: 1, 2, 3, 4.
  Cycle(u, 0, &token, {{1}, {0}, {0}, {0}});  // +1 < boundary 2: no change; boundary -> 1
  CHECK(u.utility(0, 1) == 0);
  Cycle(u, 0, &token, {{1}, {1}, {0}, {0}});  // +1 >= 1
  CHECK(u.utility(0, 1) == 1);
  CHECK_FALSE(u.hot(0, 1));  // threshold 2
  Cycle(u, 0, &token, {{1}, {1}, {1}, {0}});
  CHECK(u.utility(0, 1) == 2);
  CHECK(u.hot(0, 1));
  Cycle(u, 0, &token, {{1}, {1}, {1}, {1}});
  CHECK(u.utility(0, 1) == 2);  // the top level
  // Expert 0 fell from 3 to 0 over those cycles (-1, -1, -1 against a
  // boundary of 2 that calibrates to 1): down to 0, never below.
  CHECK(u.utility(0, 0) == 0);
}

TEST_CASE("expert utility: the hot list is ordered by utility", "[worker][policy]") {
  ExpertUtility u(2, 4, {.window = 1, .levels = 4, .threshold = 1, .forgetting = 0.1});
  uint32_t token = 0;
  Cycle(u, 1, &token, {{2}});  // layer 1 expert 2: 1
  Cycle(u, 0, &token, {{3}});  // layer 0 expert 3: 1
  Cycle(u, 0, &token, {{0}});  // expert 3 falls back; expert 0: 1
  Cycle(u, 0, &token, {{0, 3}});  // expert 3 rises again
  // Layer 0: expert 0 (f 1 -> 1: stays 1), expert 3 (0 -> 1: 1).
  CHECK(u.utility(0, 0) == 1);
  CHECK(u.utility(0, 3) == 1);
  Cycle(u, 1, &token, {{}});  // layer 1: expert 2 falls to 0
  Cycle(u, 1, &token, {{2}});  // and rises to 1 again
  Cycle(u, 1, &token, {{2, 2}});  // f 1 -> 2: 2
  CHECK(u.utility(1, 2) == 2);
  const std::vector<std::pair<int, int>> hot = u.Hot();
  REQUIRE(hot.size() == 3);
  CHECK(hot[0] == std::pair<int, int>{1, 2});
  CHECK(hot[1] == std::pair<int, int>{0, 0});
  CHECK(hot[2] == std::pair<int, int>{0, 3});
}

}  // namespace odmoe::test
