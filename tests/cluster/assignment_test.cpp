#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "cluster/assignment.h"
#include "cluster/recall.h"

namespace odmoe {

TEST_CASE("assignment: hinted slots are the sorted prediction", "[cluster]") {
  CHECK(HintedAssignment(std::vector<int32_t>{5, 2}) == std::vector<int32_t>{2, 5});
  CHECK(HintedAssignment(std::vector<int32_t>{1, 7, 3}) == std::vector<int32_t>{1, 3, 7});
}

TEST_CASE("assignment: matched experts stay, the others reload", "[cluster]") {
  // {2,5} predicted: worker 0 loaded 2, worker 1 loaded 5.
  CHECK(FinalAssignment(std::vector<int32_t>{5, 2}, std::vector<int32_t>{2, 7}) ==
        std::vector<int32_t>{2, 7});
  CHECK(FinalAssignment(std::vector<int32_t>{5, 2}, std::vector<int32_t>{7, 5}) ==
        std::vector<int32_t>{7, 5});
  CHECK(FinalAssignment(std::vector<int32_t>{5, 2}, std::vector<int32_t>{6, 1}) ==
        std::vector<int32_t>{1, 6});
  // No prediction: the canonical placement, equal to what a correct hint gives.
  CHECK(FinalAssignment({}, std::vector<int32_t>{6, 1}) == std::vector<int32_t>{1, 6});
  CHECK(FinalAssignment(std::vector<int32_t>{6, 1}, std::vector<int32_t>{1, 6}) ==
        FinalAssignment({}, std::vector<int32_t>{1, 6}));
}

TEST_CASE("assignment: every chosen expert is computed exactly once", "[cluster]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int k = 1 + trial % 4;
    std::vector<int32_t> pool(8);
    for (int e = 0; e < 8; ++e) pool[static_cast<size_t>(e)] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> actual(pool.begin(), pool.begin() + k);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> predicted(pool.begin(), pool.begin() + k);
    std::vector<int32_t> slots = FinalAssignment(predicted, actual);
    std::vector<int32_t> a = actual, s = slots;
    std::sort(a.begin(), a.end());
    std::sort(s.begin(), s.end());
    REQUIRE(a == s);
    // A correctly predicted expert stays on the worker that prefetched it.
    const std::vector<int32_t> hinted = HintedAssignment(predicted);
    for (size_t i = 0; i < hinted.size(); ++i) {
      if (std::find(actual.begin(), actual.end(), hinted[i]) != actual.end()) {
        REQUIRE(slots[i] == hinted[i]);
      }
    }
    REQUIRE(CountCorrect(predicted, actual) ==
            static_cast<int>(std::count_if(predicted.begin(), predicted.end(), [&](int32_t e) {
              return std::find(actual.begin(), actual.end(), e) != actual.end();
            })));
  }
}

TEST_CASE("recall: Eq. 2 and 3 of the paper", "[cluster]") {
  RecallCounter r(/*n_layer=*/2, /*k=*/2);
  // Token 1: layer 0 fully right, layer 1 half right -> 3 / 4.
  r.RecordActual(1, 0, std::vector<int32_t>{1, 2});
  r.RecordPrediction(1, 0, std::vector<int32_t>{2, 1});
  r.RecordActual(1, 1, std::vector<int32_t>{3, 4});
  r.RecordPrediction(1, 1, std::vector<int32_t>{4, 5});
  // Token 2: layer 0 wrong, layer 1 missing -> 0 / 2 (missing apart).
  r.RecordActual(2, 0, std::vector<int32_t>{1, 2});
  r.RecordPrediction(2, 0, std::vector<int32_t>{3, 4});
  r.RecordActual(2, 1, std::vector<int32_t>{1, 2});
  const RecallSummary s = r.Summarize(2);
  REQUIRE(s.per_token.size() == 2);
  CHECK(s.per_token[0] == Approx(0.75));
  CHECK(s.per_token[1] == Approx(0.0));
  CHECK(s.overall == Approx(3.0 / 6.0));
  CHECK(s.predictions_missing == 1);
  CHECK(s.correct == 3);
  CHECK(s.slots == 6);
  // Out-of-range records are ignored, not crashes.
  r.RecordActual(0, 0, std::vector<int32_t>{1, 2});
  r.RecordPrediction(3, 9, std::vector<int32_t>{1, 2});
  CHECK(r.Summarize(2).overall == Approx(3.0 / 6.0));
}

}  // namespace odmoe
