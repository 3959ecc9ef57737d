#include "cluster/assignment.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

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

TEST_CASE("assignment: worker i of a group of G computes positions i and i+G and so on",
          "[cluster]") {
  CHECK(PositionsOfWorker(0, 2, 2) == std::vector<int>{0});  // the paper's G = k = 2
  CHECK(PositionsOfWorker(1, 2, 2) == std::vector<int>{1});
  CHECK(PositionsOfWorker(0, 1, 2) == std::vector<int>{0, 1});  // one worker, both experts
  CHECK(PositionsOfWorker(0, 3, 8) == std::vector<int>{0, 3, 6});
  CHECK(PositionsOfWorker(2, 3, 8) == std::vector<int>{2, 5});
  CHECK(PositionsOfWorker(2, 3, 2).empty());  // G > k: worker 2 idles
  CHECK(PositionsOfWorker(3, 4, 2).empty());
  CHECK(WorkerOfPosition(5, 2) == 1);
  CHECK(WorkerOfPosition(5, 8) == 5);
  for (int k = 1; k <= 9; ++k) {
    for (int g = 1; g <= 10; ++g) {
      std::vector<int> seen(static_cast<size_t>(k), 0);
      for (int i = 0; i < g; ++i) {
        const std::vector<int> mine = PositionsOfWorker(i, g, k);
        // ceil(k / G) or floor(k / G) each, the first k mod G workers one more.
        REQUIRE(static_cast<int>(mine.size()) == k / g + (i < k % g ? 1 : 0));
        REQUIRE(std::is_sorted(mine.begin(), mine.end()));
        for (int p : mine) {
          REQUIRE(WorkerOfPosition(p, g) == i);
          ++seen[static_cast<size_t>(p)];
        }
      }
      REQUIRE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  }
}

TEST_CASE("assignment: k experts on G workers keep predicted ones where prefetched", "[cluster]") {
  // Top-4 of 8 on a group of 2: worker 0 prefetches positions {0, 2}, worker 1 {1, 3}.
  const std::vector<int32_t> predicted{7, 1, 5, 3};
  const std::vector<int32_t> hinted = HintedAssignment(predicted);  // {1, 3, 5, 7}
  CHECK(ExpertsOfWorker(hinted, 0, 2) == std::vector<int32_t>{1, 5});
  CHECK(ExpertsOfWorker(hinted, 1, 2) == std::vector<int32_t>{3, 7});
  // 5 was wrong: its position goes to 4; worker 0 reloads once, worker 1 keeps both.
  const std::vector<int32_t> fin = FinalAssignment(predicted, std::vector<int32_t>{7, 1, 4, 3});
  CHECK(fin == std::vector<int32_t>{1, 3, 4, 7});
  CHECK(ExpertsOfWorker(fin, 0, 2) == std::vector<int32_t>{1, 4});
  CHECK(ExpertsOfWorker(fin, 1, 2) == std::vector<int32_t>{3, 7});
  // Top-2 on one worker: it computes both, in position order.
  CHECK(ExpertsOfWorker(FinalAssignment(std::vector<int32_t>{5, 2}, std::vector<int32_t>{7, 5}), 0,
                        1) == std::vector<int32_t>{7, 5});
  // Top-2 on a group of 3: the third worker computes nothing.
  CHECK(ExpertsOfWorker(FinalAssignment({}, std::vector<int32_t>{6, 1}), 2, 3).empty());
  CHECK(ExpertsOfWorker(FinalAssignment({}, std::vector<int32_t>{6, 1}), 1, 3) ==
        std::vector<int32_t>{6});
}

TEST_CASE("assignment: any k on any G computes every chosen expert once on its prefetcher",
          "[cluster]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 4000; ++trial) {
    const int k = 1 + trial % 8;
    const int g = 1 + (trial / 8) % 10;
    std::vector<int32_t> pool(16);
    for (int e = 0; e < 16; ++e) pool[static_cast<size_t>(e)] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    const std::vector<int32_t> actual(pool.begin(), pool.begin() + k);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> predicted(pool.begin(), pool.begin() + k);
    if (trial % 7 == 0) predicted.clear();  // no prediction
    const std::vector<int32_t> fin = FinalAssignment(predicted, actual);
    const std::vector<int32_t> hinted = HintedAssignment(predicted);
    std::vector<int32_t> computed;
    for (int i = 0; i < g; ++i) {
      const std::vector<int32_t> mine = ExpertsOfWorker(fin, i, g);
      REQUIRE(mine.size() == PositionsOfWorker(i, g, k).size());
      computed.insert(computed.end(), mine.begin(), mine.end());
      if (predicted.empty()) continue;
      // Every correctly predicted expert worker i prefetched, it computes.
      for (int32_t e : ExpertsOfWorker(hinted, i, g)) {
        if (std::find(actual.begin(), actual.end(), e) != actual.end()) {
          REQUIRE(std::find(mine.begin(), mine.end(), e) != mine.end());
        }
      }
    }
    std::vector<int32_t> a = actual;
    std::sort(a.begin(), a.end());
    std::sort(computed.begin(), computed.end());
    REQUIRE(computed == a);
    if (g == k) {
      // The paper's one expert per worker: worker i computes position i.
      for (int i = 0; i < g; ++i) {
        REQUIRE(ExpertsOfWorker(fin, i, g) == std::vector<int32_t>{fin[static_cast<size_t>(i)]});
      }
    }
  }
}

TEST_CASE("assignment: a verification's experts stay where prefetched, the rest spread",
          "[cluster][speculative]") {
  // The header's example: 5 and 2 were hinted at positions 1 and 0.
  CHECK(SpreadAssignment(std::vector<int32_t>{2, 5}, std::vector<int32_t>{5, 1, 2, 6}, 2, 2) ==
        std::vector<int>{1, 0, 0, 1});
  // No prediction: round-robin over the workers, least loaded first.
  CHECK(SpreadAssignment({}, std::vector<int32_t>{3, 4, 5}, 2, 2) == std::vector<int>{0, 1, 0});
  // G > k: only the k workers with positions take experts.
  for (int p : SpreadAssignment(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2, 3, 4, 5},
                                /*group_size=*/4, /*k=*/2)) {
    CHECK(p < 2);
  }
  // G < k (top-4 on 2 workers): a hinted expert at position 3 stays on worker 1.
  const std::vector<int> pos = SpreadAssignment(std::vector<int32_t>{10, 20, 30, 40},
                                                std::vector<int32_t>{40, 7}, 2, 4);
  CHECK(pos[0] == 3);
  CHECK(WorkerOfPosition(pos[1], 2) == 0);  // the less loaded worker
  CHECK(pos[1] < 4);                        // a position the worker validates
}

TEST_CASE("recall: a skipped dense layer is neither missing nor counted", "[cluster]") {
  // Llama 4: layer 1 of 3 has a dense FFN between layers with experts.
  RecallCounter r(/*n_layer=*/3, /*k=*/1);
  r.SkipLayer(1);
  r.RecordActual(1, 0, std::vector<int32_t>{5});
  r.RecordPrediction(1, 0, std::vector<int32_t>{5});
  r.RecordActual(1, 2, std::vector<int32_t>{7});
  r.RecordPrediction(1, 2, std::vector<int32_t>{6});
  const RecallSummary s = r.Summarize(1);
  CHECK(s.predictions_missing == 0);
  CHECK(s.slots == 2);
  CHECK(s.overall == Approx(0.5));
  CHECK(s.layer_slots == std::vector<uint64_t>{1, 0, 1});
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
  // By layer: layer 0 right 2 of 2, then 0 of 2; layer 1 right 1 of 2, then unpredicted.
  CHECK(s.layer_correct == std::vector<uint64_t>{2, 1});
  CHECK(s.layer_slots == std::vector<uint64_t>{4, 2});
  // Out-of-range records are ignored, not crashes.
  r.RecordActual(0, 0, std::vector<int32_t>{1, 2});
  r.RecordPrediction(3, 9, std::vector<int32_t>{1, 2});
  CHECK(r.Summarize(2).overall == Approx(3.0 / 6.0));
}

}  // namespace odmoe
