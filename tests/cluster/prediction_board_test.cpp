// The prediction board's drafts (speculative decoding): which chain of the
// shadow's drafted tokens continues the main node's token, and how long the
// main node waits for one.
#include "main_node/prediction_board.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

namespace odmoe {

TEST_CASE("prediction board: a draft chain follows inputs to outputs", "[cluster][speculative]") {
  PredictionBoard board;
  board.Track(7);
  board.PutDraft(7, 3, /*input=*/100, /*output=*/101);
  board.PutDraft(7, 4, 101, 102);
  board.PutDraft(7, 5, 555, 103);  // ran on another input: the chain stops before it
  board.PutDraft(8, 3, 100, 999);  // another request: dropped
  CHECK(board.DraftChain(7, 3, 100, 8) == std::vector<int32_t>{101, 102});
  CHECK(board.DraftChain(7, 3, 100, 1) == std::vector<int32_t>{101});
  CHECK(board.DraftChain(7, 3, 42, 8).empty());   // iteration 3 ran on another token
  CHECK(board.DraftChain(7, 9, 100, 8).empty());  // not drafted yet
  CHECK(board.DraftChain(8, 3, 100, 8).empty());
  board.PutDraft(7, 5, 102, 104);  // recomputed on the right input: replaces the old one
  CHECK(board.DraftChain(7, 3, 100, 8) == std::vector<int32_t>{101, 102, 104});
  board.Track(9);
  CHECK(board.DraftChain(9, 3, 100, 8).empty());
}

TEST_CASE("prediction board: waiting for a chain ends when it is whole, hopeless or done",
          "[cluster][speculative]") {
  PredictionBoard board;
  board.Track(7);
  board.PutDraft(7, 1, 10, 11);
  // The rest arrives while the main node waits.
  std::thread drafter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    board.PutDraft(7, 2, 11, 12);
    board.PutDraft(7, 3, 12, 13);
  });
  CHECK(board.WaitDraftChain(7, 1, 10, 3, true, absl::Seconds(30)) ==
        std::vector<int32_t>{11, 12, 13});
  drafter.join();
  // Drafted from another token and not told the main node's: no use waiting.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(board.WaitDraftChain(7, 1, 99, 3, /*realigned=*/false, absl::Seconds(30)).empty());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  // Told it (realigned): waits for the recomputed draft, up to the timeout.
  CHECK(board.WaitDraftChain(7, 1, 99, 3, true, absl::Milliseconds(30)).empty());
  // The drafter is done with the request: what there is.
  board.MarkDone(7);
  CHECK(board.WaitDraftChain(7, 1, 10, 8, true, absl::Seconds(30)) ==
        std::vector<int32_t>{11, 12, 13});
}

TEST_CASE("prediction board: several requests keep their own pages", "[cluster][batching]") {
  PredictionBoard board;
  board.Track(7);
  board.Track(8);
  board.Put(7, 1, 0, {1, 2});
  board.Put(8, 1, 0, {3, 4});
  board.Put(9, 1, 0, {5, 6});  // not tracked: dropped
  board.PutDraft(8, 1, 10, 11);
  CHECK(board.Get(7, 1, 0) == std::vector<int32_t>{1, 2});
  CHECK(board.Get(8, 1, 0) == std::vector<int32_t>{3, 4});
  CHECK(board.Get(9, 1, 0).empty());
  CHECK(board.DraftChain(8, 1, 10, 4) == std::vector<int32_t>{11});
  CHECK(board.DraftChain(7, 1, 10, 4).empty());
  CHECK(board.Snapshot(7).size() == 1);
  CHECK(board.tracked() == 2);
  // Done is per request: 8 finishing says nothing about 7.
  board.MarkDone(8);
  CHECK(board.WaitDone(8, absl::Milliseconds(1)));
  CHECK_FALSE(board.WaitDone(7, absl::Milliseconds(1)));
  board.MarkDone(9);  // not tracked: nothing to wait for
  CHECK_FALSE(board.WaitDone(9, absl::Milliseconds(1)));
  // Forgetting one leaves the other; tracking again starts an empty page.
  board.Forget(8);
  CHECK(board.Get(8, 1, 0).empty());
  CHECK(board.Get(7, 1, 0) == std::vector<int32_t>{1, 2});
  board.Track(7);
  CHECK(board.Snapshot(7).empty());
  CHECK(board.tracked() == 1);
}

}  // namespace odmoe
