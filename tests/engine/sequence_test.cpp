// Sequence::ConsumedDrafts, speculative decoding's bookkeeping: which drafts
// are taken, where the sequence stands afterwards, and the stop rules inside
// a run of accepted drafts.
#include "engine/sequence.h"

#include <catch2/catch.hpp>

#include "engine/reference_engine.h"
#include "test_paths.h"

namespace odmoe {
namespace {

const Tokenizer& Tok() {
  static auto engine =
      ReferenceEngine::Create(test::SourcePath("models/tiny-mixtral-f16.gguf"), {}).value();
  return engine->tokenizer();
}

// Rows of logits whose argmax is each of `ids`.
std::vector<float> RowsFor(const std::vector<int32_t>& ids) {
  const size_t v = static_cast<size_t>(Tok().n_vocab());
  std::vector<float> logits(ids.size() * v, 0.0f);
  for (size_t r = 0; r < ids.size(); ++r) logits[r * v + static_cast<size_t>(ids[r])] = 5.0f;
  return logits;
}

// A sequence past its prompt (3 tokens), whose first sampled token is 10.
Sequence Decoding(int max_tokens, bool ignore_eos = true) {
  GenerateRequest req;
  req.max_tokens = max_tokens;
  req.ignore_eos = ignore_eos;
  Sequence seq(Tok(), req, {1, 20, 30});
  seq.Consumed(3, RowsFor({10}));
  return seq;
}

}  // namespace

TEST_CASE("sequence: drafts are taken up to the first disagreement, then its correction",
          "[engine][speculative]") {
  Sequence seq = Decoding(20);
  REQUIRE(seq.pos() == 3);
  REQUIRE(seq.Pending(1).front() == 10);
  // Rows: 10 (pending), drafts 11, 12, 13. The model says 11, 12, 99, 14.
  const std::vector<int32_t> drafts = {11, 12, 13};
  CHECK(seq.ConsumedDrafts(drafts, RowsFor({11, 12, 99, 14})) == 2);
  CHECK(seq.result().output_ids == std::vector<int32_t>{10, 11, 12, 99});
  CHECK(seq.pos() == 6);  // rows 10, 11, 12 ran on right inputs; 13's row is overwritten
  CHECK(seq.Pending(1).front() == 99);
  // Every draft right: all of them plus the token after the last.
  CHECK(seq.ConsumedDrafts(std::vector<int32_t>{7, 8}, RowsFor({7, 8, 9})) == 2);
  CHECK(seq.result().output_ids == std::vector<int32_t>{10, 11, 12, 99, 7, 8, 9});
  CHECK(seq.pos() == 9);
  CHECK(seq.Pending(1).front() == 9);
  // None right.
  CHECK(seq.ConsumedDrafts(std::vector<int32_t>{5}, RowsFor({6, 5})) == 0);
  CHECK(seq.pos() == 10);
  CHECK(seq.Pending(1).front() == 6);
}

TEST_CASE("sequence: max_tokens and EOS end a run of accepted drafts", "[engine][speculative]") {
  Sequence capped = Decoding(3);
  capped.ConsumedDrafts(std::vector<int32_t>{11, 12, 13}, RowsFor({11, 12, 13, 14}));
  CHECK(capped.done());
  CHECK(capped.result().output_ids == std::vector<int32_t>{10, 11, 12});
  CHECK(capped.result().stop_reason == GenerateResult::StopReason::kMaxTokens);

  const int32_t eos = Tok().eos_id();
  Sequence ends = Decoding(20, /*ignore_eos=*/false);
  ends.ConsumedDrafts(std::vector<int32_t>{11, eos, 13}, RowsFor({11, eos, 13, 14}));
  CHECK(ends.done());
  CHECK(ends.result().output_ids == std::vector<int32_t>{10, 11});
  CHECK(ends.result().stop_reason == GenerateResult::StopReason::kEos);
}

}  // namespace odmoe
