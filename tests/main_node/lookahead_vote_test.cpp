// The gate look-ahead's variants: which layer is predicted, who votes, and
// how their candidate sets combine.
#include <catch2/catch.hpp>

#include <vector>

#include "main_node/lookahead_vote.h"

namespace odmoe {
namespace {

const auto kAllMoe = [](int) { return true; };
const auto kFirstDense = [](int l) { return l >= 1; };  // DeepSeek-V2: layer 0 dense

TEST_CASE("look-ahead target: the next MoE layer, from the first predicted layer on",
          "[main_node]") {
  const LookaheadSpec plain;
  CHECK(LookaheadTarget(plain, 0, 8, kAllMoe) == 1);
  CHECK(LookaheadTarget(plain, 6, 8, kAllMoe) == 7);
  CHECK(LookaheadTarget(plain, 7, 8, kAllMoe) == -1);  // past the last layer
  const LookaheadSpec daop{1, 0, 4};
  CHECK(LookaheadTarget(daop, 2, 8, kAllMoe) == -1);  // layer 3: its own gate
  CHECK(LookaheadTarget(daop, 3, 8, kAllMoe) == 4);
  CHECK(LookaheadTarget(plain, 0, 8, [](int l) { return l != 1; }) == -1);  // dense layer 1
}

TEST_CASE("look-ahead voters: the latest MoE layers, at most P", "[main_node]") {
  CHECK(VotingLayers(LookaheadSpec{}, 5, kAllMoe) == std::vector<int>{5});
  CHECK(VotingLayers(LookaheadSpec{3, 4, 0}, 5, kAllMoe) == std::vector<int>{5, 4, 3});
  CHECK(VotingLayers(LookaheadSpec{3, 4, 0}, 1, kAllMoe) == std::vector<int>{1, 0});
  CHECK(VotingLayers(LookaheadSpec{3, 4, 0}, 2, kFirstDense) == std::vector<int>{2, 1});
}

TEST_CASE("look-ahead candidates: the model's top-k unless set, at most every expert",
          "[main_node]") {
  CHECK(CandidatesPerVoter(LookaheadSpec{}, 2, 8) == 2);
  CHECK(CandidatesPerVoter(LookaheadSpec{3, 4, 0}, 2, 8) == 4);
  CHECK(CandidatesPerVoter(LookaheadSpec{3, 40, 0}, 2, 8) == 8);
}

TEST_CASE("look-ahead votes: the experts every voter names, in the first's order",
          "[main_node]") {
  using V = std::vector<int32_t>;
  CHECK(IntersectCandidates(std::vector<V>{}).empty());
  CHECK(IntersectCandidates(std::vector<V>{{5, 1, 3}}) == V{5, 1, 3});
  CHECK(IntersectCandidates(std::vector<V>{{5, 1, 3, 7}, {3, 5, 0, 2}, {2, 3, 4, 5}}) ==
        V{5, 3});
  CHECK(IntersectCandidates(std::vector<V>{{5, 1}, {2, 3}}).empty());
  CHECK(IntersectCandidates(std::vector<V>{{4, 4, 2}, {2, 4}}) == V{4, 2});  // no repeats
}

}  // namespace
}  // namespace odmoe
