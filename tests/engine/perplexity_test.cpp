// The perplexity conventions (engine/perplexity.h) on synthetic logits whose
// answers are computed by hand: log-softmax of one row, the NLL sums and
// llama.cpp's error formula, chunking with BOS, and the running estimate.
#include "engine/perplexity.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "engine/scoring.h"

namespace odmoe {
namespace {

// The logits row the synthetic "model" gives at position j of a chunk when
// the next token is `next` (vocabulary of 4): at even j the next token gets
// logit ln 3 and the others 0, so p = 3 / 6 = 1/2; at odd j all logits are 0,
// p = 1/4. So nll alternates ln 2 (even j) and ln 4 (odd j).
std::vector<float> SyntheticRow(int j, int32_t next) {
  std::vector<float> row(4, 0.0f);
  if (j % 2 == 0) row[static_cast<size_t>(next)] = std::log(3.0f);
  return row;
}

}  // namespace

TEST_CASE("perplexity: log-softmax of one row, by hand", "[engine][perplexity]") {
  const std::vector<float> logits = {1, 2, 3, 4};
  const RowScore s = ScoreLogitsRow(logits, 2, 0);
  // 3 - 4 - log(e^-3 + e^-2 + e^-1 + 1)
  CHECK(s.target_logprob == Approx(-1.4401896985611953).epsilon(1e-14));
  CHECK(s.top1 == 3);
  CHECK(s.top.empty());

  const std::vector<float> uniform(8, 0.5f);
  CHECK(ScoreLogitsRow(uniform, 5, 0).target_logprob == Approx(-std::log(8.0)).epsilon(1e-15));
  CHECK(ScoreLogitsRow(uniform, 5, 0).top1 == 0);  // ties: lowest id, as greedy sampling

  const std::vector<float> ties = {5, 1, 5, 3};
  const RowScore t = ScoreLogitsRow(ties, -1, 3);
  CHECK(t.target_logprob == 0);
  CHECK(t.top1 == 0);
  REQUIRE(t.top.size() == 3);
  CHECK(t.top[0].id == 0);
  CHECK(t.top[1].id == 2);
  CHECK(t.top[2].id == 3);
  CHECK(t.top[0].logprob == t.top[1].logprob);
  CHECK(t.top[2].logprob == Approx(-2 - std::log(2 + std::exp(-4.0) + std::exp(-2.0))));
  CHECK(ScoreLogitsRow(ties, 0, 99).top.size() == 4);  // clamped to the row
}

TEST_CASE("perplexity: NLL sums and the error formula", "[engine][perplexity]") {
  NllAccumulator empty;
  CHECK(empty.perplexity() == 1.0);
  CHECK(empty.perplexity_error() == 0.0);
  CHECK(FormatFinalEstimate(empty) == "Final estimate: PPL = 1.0000");

  NllAccumulator nll;
  for (double v : {1.0, 2.0, 3.0}) nll.Add(v);
  CHECK(nll.count() == 3);
  CHECK(nll.mean() == 2.0);
  CHECK(nll.perplexity() == Approx(7.38905609893065).epsilon(1e-14));
  // var = 14/3 - 4 = 2/3; error = e^2 * sqrt(var / 2) = e^2 / sqrt(3)
  CHECK(nll.perplexity_error() == Approx(4.266073527774857).epsilon(1e-12));
  CHECK(FormatFinalEstimate(nll) == "Final estimate: PPL = 7.3891 +/- 4.26607");

  NllAccumulator constant;
  for (int i = 0; i < 5; ++i) constant.Add(std::log(4.0));
  CHECK(constant.perplexity() == Approx(4.0).epsilon(1e-14));
  CHECK(constant.perplexity_error() == 0.0);
}

TEST_CASE("perplexity: planning the chunks", "[engine][perplexity]") {
  auto plan = PlanPerplexity(1000, {.ctx = 128}, 512, 1);
  REQUIRE(plan.ok());
  CHECK(plan->ctx == 128);
  CHECK(plan->n_chunks == 7);  // floor(1000 / 128)
  CHECK(plan->first == 64);
  CHECK(plan->scored_per_chunk() == 63);
  CHECK(plan->bos_id == 1);
  CHECK(PlanPerplexity(1000, {.ctx = 128, .max_chunks = 3}, 512, 1)->n_chunks == 3);
  CHECK(PlanPerplexity(1000, {.ctx = 128, .max_chunks = 30}, 512, 1)->n_chunks == 7);
  CHECK(PlanPerplexity(5000, {}, 4096, -1)->ctx == 512);  // default, clamped
  CHECK(PlanPerplexity(5000, {}, 300, -1)->ctx == 300);
  CHECK(PlanPerplexity(7, {.ctx = 7}, 512, -1)->first == 3);

  auto too_big = PlanPerplexity(5000, {.ctx = 1024}, 512, 1);
  CHECK(absl::IsInvalidArgument(too_big.status()));
  CHECK(too_big.status().message() == "--ctx 1024 exceeds the context of 512 tokens");
  auto too_short = PlanPerplexity(100, {.ctx = 128}, 512, 1);
  CHECK(absl::IsInvalidArgument(too_short.status()));
  CHECK(too_short.status().message().find("fewer than one chunk") != std::string::npos);
  CHECK(absl::IsInvalidArgument(PlanPerplexity(100, {.ctx = 3}, 512, 1).status()));
  CHECK(absl::IsInvalidArgument(PlanPerplexity(100, {.ctx = -5}, 512, 1).status()));
  CHECK(
      absl::IsInvalidArgument(PlanPerplexity(100, {.ctx = 8, .max_chunks = -1}, 512, 1).status()));
}

TEST_CASE("perplexity: chunks start with BOS", "[engine][perplexity]") {
  std::vector<int32_t> tokens(20);
  for (int i = 0; i < 20; ++i) tokens[static_cast<size_t>(i)] = 100 + i;
  PerplexityPlan plan = PlanPerplexity(20, {.ctx = 8}, 512, 1).value();
  CHECK(plan.n_chunks == 2);
  CHECK(ChunkTokens(tokens, plan, 1) == std::vector<int32_t>{1, 109, 110, 111, 112, 113, 114, 115});
  plan.bos_id = -1;  // a vocabulary without BOS: the chunk as it is
  CHECK(ChunkTokens(tokens, plan, 1) ==
        std::vector<int32_t>{108, 109, 110, 111, 112, 113, 114, 115});
}

TEST_CASE("perplexity: a synthetic logits stream gives the hand-computed PPL",
          "[engine][perplexity]") {
  // 18 tokens over a vocabulary of 4, chunks of 8: 2 chunks, scored j = 4, 5, 6
  // with nll ln2, ln4, ln2 each: mean 4/3 ln 2, PPL 2^(4/3);
  // var = 2 ln2^2 - (4/3 ln2)^2 = 2/9 ln2^2, error = PPL sqrt(var / 5).
  const std::vector<int32_t> tokens = {3, 1, 2, 3, 0, 1, 2, 3, 2, 2, 1, 0, 3, 3, 1, 2, 0, 1};
  const PerplexityPlan plan = PlanPerplexity(18, {.ctx = 8}, 512, 0).value();
  std::vector<std::vector<int32_t>> seen;
  auto scorer = [&](std::span<const int32_t> chunk, int first) -> absl::StatusOr<ScoreResult> {
    seen.emplace_back(chunk.begin(), chunk.end());
    ScoreResult r;
    r.first = first;
    for (int j = first; j < static_cast<int>(chunk.size()); ++j) {
      const int32_t next = j + 1 < static_cast<int>(chunk.size()) ? chunk[j + 1] : -1;
      const RowScore s = ScoreLogitsRow(SyntheticRow(j, next < 0 ? 0 : next), next, 0);
      if (next >= 0) r.next_logprobs.push_back(s.target_logprob);
      r.top1.push_back(s.top1);
    }
    return r;
  };
  std::vector<ChunkProgress> progress;
  auto result =
      RunPerplexity(tokens, plan, scorer, [&](const ChunkProgress& p) { progress.push_back(p); });
  REQUIRE(result.ok());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(seen[1] == std::vector<int32_t>{0, 2, 1, 0, 3, 3, 1, 2});
  CHECK(result->nll.count() == 6);
  // ln 3 is rounded to float in the logits (relative 3e-8), hence 1e-7.
  CHECK(result->nll.perplexity() == Approx(2.5198420997897464).epsilon(1e-7));
  CHECK(result->nll.perplexity_error() == Approx(0.36822013215890176).epsilon(1e-7));
  CHECK(result->running_ppl.size() == 2);
  CHECK(result->running_ppl[0] == result->running_ppl[1]);  // both chunks score alike
  CHECK(FormatFinalEstimate(result->nll) == "Final estimate: PPL = 2.5198 +/- 0.36822");
  REQUIRE(progress.size() == 2);
  CHECK(progress[1].chunk == 1);
  CHECK(progress[1].n_chunks == 2);
  // Greedy tokens: the next token at even j (logit ln 3), token 0 at odd j.
  CHECK(result->top1[0] == std::vector<int32_t>{1, 0, 3});
  CHECK(result->top1[1] == std::vector<int32_t>{3, 0, 2});
  // Matches: j = 4 and 6 of both chunks; never j = 5 (0 vs 2, 0 vs 1).
  CHECK(result->top1_matches == 4);
}

TEST_CASE("perplexity: chunks handed out several at a time give the same numbers",
          "[engine][perplexity]") {
  // 5 chunks of 8 over a vocabulary of 4; a scorer whose scores depend on the
  // chunk's tokens, so a chunk scored in the wrong place would show.
  std::vector<int32_t> tokens(43);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i / 5) % 4);
  const PerplexityPlan plan = PlanPerplexity(43, {.ctx = 8}, 512, 0).value();
  REQUIRE(plan.n_chunks == 5);
  auto score_one = [](std::span<const int32_t> chunk, int first) {
    ScoreResult r;
    r.first = first;
    for (int j = first; j < static_cast<int>(chunk.size()); ++j) {
      const int32_t next = j + 1 < static_cast<int>(chunk.size()) ? chunk[j + 1] : -1;
      std::vector<float> row = SyntheticRow(j, next < 0 ? 0 : next);
      row[static_cast<size_t>(chunk[static_cast<size_t>(j)])] += 0.25f;
      const RowScore s = ScoreLogitsRow(row, next, 0);
      if (next >= 0) r.next_logprobs.push_back(s.target_logprob);
      r.top1.push_back(s.top1);
    }
    return r;
  };
  auto score_alone = [&](std::span<const int32_t> c, int first) -> absl::StatusOr<ScoreResult> {
    return score_one(c, first);
  };
  const PerplexityResult one = RunPerplexity(tokens, plan, score_alone).value();
  for (int per_call : {1, 2, 3, 5, 9}) {
    INFO("chunks per call " << per_call);
    std::vector<int> call_sizes;
    std::vector<int> progress;
    auto scorer = [&](std::span<const std::vector<int32_t>> chunks,
                      int first) -> absl::StatusOr<std::vector<ScoreResult>> {
      call_sizes.push_back(static_cast<int>(chunks.size()));
      std::vector<ScoreResult> out;
      for (const std::vector<int32_t>& c : chunks) out.push_back(score_one(c, first));
      return out;
    };
    auto r = RunPerplexityBatched(tokens, plan, per_call, scorer,
                                  [&](const ChunkProgress& p) { progress.push_back(p.chunk); });
    REQUIRE(r.ok());
    CHECK(r->nll.perplexity() == one.nll.perplexity());
    CHECK(r->nll.perplexity_error() == one.nll.perplexity_error());
    CHECK(r->running_ppl == one.running_ppl);
    CHECK(r->top1 == one.top1);
    CHECK(r->next_logprob == one.next_logprob);
    CHECK(r->top1_matches == one.top1_matches);
    CHECK(progress == std::vector<int>{0, 1, 2, 3, 4});
    const int calls = (5 + per_call - 1) / per_call;
    REQUIRE(static_cast<int>(call_sizes.size()) == calls);
    CHECK(call_sizes.back() == 5 - (calls - 1) * per_call);
  }
  auto too_few = [&](std::span<const std::vector<int32_t>> chunks,
                     int first) -> absl::StatusOr<std::vector<ScoreResult>> {
    return std::vector<ScoreResult>{score_one(chunks[0], first)};
  };
  const absl::Status short_call = RunPerplexityBatched(tokens, plan, 2, too_few).status();
  CHECK(absl::IsDataLoss(short_call));
  CHECK(short_call.message().find("returned 1 results for 2 chunks") != std::string::npos);
  CHECK(absl::IsInvalidArgument(RunPerplexityBatched(tokens, plan, 0, too_few).status()));
}

TEST_CASE("perplexity: a scorer's error or a short result ends the run", "[engine][perplexity]") {
  const std::vector<int32_t> tokens(16, 1);
  const PerplexityPlan plan = PlanPerplexity(16, {.ctx = 8}, 512, 0).value();
  auto failing = [](std::span<const int32_t>, int) -> absl::StatusOr<ScoreResult> {
    return absl::UnavailableError("main node down");
  };
  CHECK(absl::IsUnavailable(RunPerplexity(tokens, plan, failing).status()));
  auto short_result = [](std::span<const int32_t>, int first) -> absl::StatusOr<ScoreResult> {
    ScoreResult r;
    r.first = first;
    r.next_logprobs = {-1.0};
    r.top1 = {0};
    return r;
  };
  CHECK(absl::IsDataLoss(RunPerplexity(tokens, plan, short_result).status()));
}

}  // namespace odmoe
