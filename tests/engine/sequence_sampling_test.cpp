// What Sequence adds to the sampler (engine/sequence.h): the penalty history
// (prompt, then each emitted token, accepted drafts included), min_tokens'
// ban on EOS and stop tokens, stop_token_ids ending the generation, the
// constraint applied to every row and told every emitted token, and
// logprobs that stay the model's distribution.
#include <catch2/catch.hpp>
#include <limits>
#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "sampling_reference.h"

namespace odmoe {
namespace {

const Tokenizer& Tok() { return test::EightTokenTokenizer(); }
constexpr int32_t kEos = 2;

// One row per token: `top` is the argmax (5), `second` next (4), EOS 3.
std::vector<float> Row(int32_t top, int32_t second = 3) {
  std::vector<float> row(8, 0.0f);
  row[kEos] = 3.0f;
  row[static_cast<size_t>(second)] = 4.0f;
  row[static_cast<size_t>(top)] = 5.0f;
  return row;
}

GenerateRequest Greedy(int max_tokens = 4) {
  GenerateRequest r;
  r.max_tokens = max_tokens;
  return r;
}

// Records what the sequence asked of it; allows all but `forbidden`.
struct Recorder : TokenConstraint {
  explicit Recorder(int32_t forbidden) : forbidden(forbidden) {}
  void MaskLogits(std::span<float> logits) override {
    ++masks;
    logits[static_cast<size_t>(forbidden)] = -std::numeric_limits<float>::infinity();
  }
  absl::Status Accept(int32_t token) override {
    accepted.push_back(token);
    return absl::OkStatus();
  }
  bool Complete() const override { return true; }
  int32_t forbidden;
  int masks = 0;
  std::vector<int32_t> accepted;
};

}  // namespace

TEST_CASE("sequence sampling: stop_token_ids end the generation, not part of the output",
          "[engine][sampler]") {
  GenerateRequest r = Greedy();
  r.stop_token_ids = {6};
  r.logprobs = 1;
  Sequence seq(Tok(), r, {1, 3});
  seq.Consumed(2, Row(4));
  seq.Consumed(1, Row(6));
  CHECK(seq.done());
  CHECK(seq.result().output_ids == std::vector<int32_t>{4});
  CHECK(seq.result().stop_reason == GenerateResult::StopReason::kStopToken);
  CHECK(std::string(StopReasonName(seq.result().stop_reason)) == "stop_token");
  REQUIRE(seq.result().eos_logprob.has_value());  // the ending token's score, as EOS's
}

TEST_CASE("sequence sampling: min_tokens bans EOS and stop tokens until then",
          "[engine][sampler]") {
  GenerateRequest r = Greedy(6);
  r.min_tokens = 2;
  r.stop_token_ids = {7};
  Sequence seq(Tok(), r, {1, 3});
  seq.Consumed(2, Row(kEos, 4));  // EOS banned: the next best, 4
  seq.Consumed(1, Row(7, 5));     // the stop token banned: 5
  seq.Consumed(1, Row(kEos, 4));  // two out: EOS ends it
  CHECK(seq.done());
  CHECK(seq.result().output_ids == std::vector<int32_t>{4, 5});
  CHECK(seq.result().stop_reason == GenerateResult::StopReason::kEos);

  // ignore_eos: EOS is a token like others, never banned; stop tokens are.
  r.ignore_eos = true;
  Sequence ignoring(Tok(), r, {1, 3});
  ignoring.Consumed(2, Row(kEos, 4));
  ignoring.Consumed(1, Row(7, 5));
  ignoring.Consumed(1, Row(7, 5));
  CHECK(ignoring.result().output_ids == std::vector<int32_t>{kEos, 5});
  CHECK(ignoring.result().stop_reason == GenerateResult::StopReason::kStopToken);
}

TEST_CASE("sequence sampling: penalties count the prompt and every emitted token",
          "[engine][sampler]") {
  GenerateRequest r = Greedy(3);
  r.sampling.presence_penalty = 2.0f;  // 5.0 - 2 < 4.0: a seen token loses to the next
  r.sampling.repeat_last_n = -1;
  Sequence seq(Tok(), r, {1, 5});
  seq.Consumed(2, Row(5, 4));  // 5 is in the prompt: 4
  seq.Consumed(1, Row(6, 4));  // 6 is new
  seq.Consumed(1, Row(6, 7));  // 6 was just emitted: 7
  CHECK(seq.result().output_ids == std::vector<int32_t>{4, 6, 7});

  // A window of 1: only the last token counts.
  r.sampling.repeat_last_n = 1;
  Sequence windowed(Tok(), r, {1, 5, 3});
  windowed.Consumed(3, Row(5, 4));  // 5 left the window: 5
  windowed.Consumed(1, Row(5, 4));  // 5 is the last: 4
  CHECK(windowed.result().output_ids == std::vector<int32_t>{5, 4});

  // Drafts: an accepted draft is history for the rows after it.
  r.sampling.repeat_last_n = -1;
  r.max_tokens = 5;
  Sequence drafting(Tok(), r, {1, 3});
  drafting.Consumed(2, Row(4, 5));  // 4
  std::vector<float> rows;
  for (const auto& row : {Row(6, 7), Row(6, 7), Row(7, 5)})
    rows.insert(rows.end(), row.begin(), row.end());
  // Drafts 6 then 7: row 0 gives 6 (taken), row 1 would give 6 but 6 is
  // now seen, so 7 (taken), row 2 would give 7, seen: 5.
  CHECK(drafting.ConsumedDrafts(std::vector<int32_t>{6, 7}, rows) == 2);
  CHECK(drafting.result().output_ids == std::vector<int32_t>{4, 6, 7, 5});
}

TEST_CASE("sequence sampling: the constraint masks every row and hears every token",
          "[engine][sampler]") {
  GenerateRequest r = Greedy(5);
  Sequence seq(Tok(), r, {1, 3});
  auto rule = std::make_unique<Recorder>(6);
  Recorder* seen = rule.get();
  seq.SetConstraint(std::move(rule));
  seq.Consumed(2, Row(6, 4));  // 6 forbidden: 4
  std::vector<float> rows;
  for (const auto& row : {Row(5), Row(7), Row(6, 3)})
    rows.insert(rows.end(), row.begin(), row.end());
  CHECK(seq.ConsumedDrafts(std::vector<int32_t>{5, 7}, rows) == 2);
  CHECK(seq.result().output_ids == std::vector<int32_t>{4, 5, 7, 3});
  CHECK(seen->accepted == seq.result().output_ids);
  CHECK(seen->masks == 4);
}

TEST_CASE("sequence sampling: logprobs are the model's, before bias and penalties",
          "[engine][sampler]") {
  GenerateRequest r = Greedy(1);
  r.logprobs = 2;
  r.sampling.logit_bias = {{3, 50.0f}};
  r.sampling.presence_penalty = 1.0f;
  Sequence seq(Tok(), r, {1, 5});
  const std::vector<float> row = Row(5, 4);
  seq.Consumed(2, row);
  REQUIRE(seq.result().output_ids == std::vector<int32_t>{3});  // the bias chose it
  const RowScore want = ScoreLogitsRow(row, 3, 2);
  CHECK(seq.result().logprobs.at(0).target_logprob == want.target_logprob);
}

TEST_CASE("sequence sampling: a row with no allowed token ends the generation",
          "[engine][sampler]") {
  GenerateRequest r = Greedy(4);
  for (int32_t t = 0; t < 8; ++t) r.sampling.logit_bias[t] = kLogitBiasBan;
  Sequence seq(Tok(), r, {1, 3});
  seq.Consumed(2, Row(5));
  CHECK(seq.done());
  CHECK(seq.result().output_ids.empty());
  CHECK(seq.result().stop_reason == GenerateResult::StopReason::kEos);
}

}  // namespace odmoe
