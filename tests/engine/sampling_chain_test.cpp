// The sampling chain (engine/sampler.h) against a reference written the long
// way here: every parameter alone and together, on fixed logits, compared
// probability by probability with what Sampler draws from; greedy on the
// processed logits; the penalty window as tokens come and go.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/request_fields.h"
#include "engine/sampler.h"
#include "sampling_reference.h"

namespace odmoe {
namespace {

using test::ReferenceProbabilities;

// Twelve tokens: a spread of positive, negative and tied logits.
const std::vector<float> kLogits = {2.0f, 1.5f, -0.5f, 0.7f, 1.5f, -2.0f,
                                    0.1f, 3.0f, -1.0f, 0.0f, 1.1f, -3.5f};
// Earlier tokens (the prompt and what was generated): 7 three times, 1 twice...
const std::vector<int32_t> kHistory = {3, 7, 1, 7, 9, 1, 7, 11, 2, 5};

std::vector<double> Chain(const SamplingParams& p, std::span<const int32_t> banned = {},
                          TokenConstraint* rule = nullptr) {
  Sampler s(p);
  s.Accept(kHistory);
  return s.Probabilities(s.Process(kLogits, banned, rule));
}

void CheckClose(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double total = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    INFO("token " << t);
    CHECK(got[t] == Approx(want[t]).margin(1e-9));
    total += got[t];
  }
  CHECK(total == Approx(1.0).margin(1e-9));
}

// Allows only tokens whose id is a multiple of `step`.
struct MultiplesOf : TokenConstraint {
  explicit MultiplesOf(int32_t step) : step(step) {}
  void MaskLogits(std::span<float> logits) override {
    for (size_t t = 0; t < logits.size(); ++t) {
      if (t % static_cast<size_t>(step) != 0) logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
  absl::Status Accept(int32_t token) override {
    return token % step == 0 ? absl::OkStatus() : absl::FailedPreconditionError("not allowed");
  }
  bool Complete() const override { return true; }
  int32_t step;
};

}  // namespace

TEST_CASE("sampling chain: each parameter and their combinations match the reference",
          "[sampler][chain]") {
  const std::map<int32_t, float> bias = {{0, -1.5f}, {5, 4.0f}, {7, kLogitBiasBan}, {11, 100.0f}};
  struct Case {
    const char* name;
    SamplingParams p;
  };
  const std::vector<Case> cases = {
      {"temperature", {.temperature = 0.8f}},
      {"top_k", {.temperature = 1.0f, .top_k = 4}},
      {"top_p", {.temperature = 1.2f, .top_p = 0.7f}},
      {"min_p", {.temperature = 1.0f, .min_p = 0.2f}},
      {"min_p at a high temperature", {.temperature = 2.0f, .min_p = 0.35f}},
      {"typical_p", {.temperature = 1.0f, .typical_p = 0.5f}},
      {"typical_p 0.9", {.temperature = 0.7f, .typical_p = 0.9f}},
      {"presence_penalty", {.temperature = 1.0f, .presence_penalty = 1.5f}},
      {"negative presence_penalty", {.temperature = 1.0f, .presence_penalty = -2.0f}},
      {"frequency_penalty", {.temperature = 1.0f, .frequency_penalty = 0.8f}},
      {"repetition_penalty", {.temperature = 1.0f, .repetition_penalty = 1.7f}},
      {"repetition_penalty below 1", {.temperature = 1.0f, .repetition_penalty = 0.6f}},
      {"penalties in a window of 4",
       {.temperature = 1.0f,
        .presence_penalty = 0.5f,
        .frequency_penalty = 0.5f,
        .repetition_penalty = 1.3f,
        .repeat_last_n = 4}},
      {"penalties over the whole context",
       {.temperature = 1.0f, .frequency_penalty = 1.0f, .repeat_last_n = -1}},
      {"penalties with no window",
       {.temperature = 1.0f, .frequency_penalty = 1.0f, .repeat_last_n = 0}},
      {"logit_bias", {.temperature = 1.0f, .logit_bias = bias}},
      {"everything",
       {.temperature = 0.9f,
        .top_p = 0.95f,
        .top_k = 9,
        .seed = 3,
        .min_p = 0.05f,
        .typical_p = 0.97f,
        .presence_penalty = 0.3f,
        .frequency_penalty = 0.2f,
        .repetition_penalty = 1.1f,
        .repeat_last_n = 6,
        .logit_bias = bias}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CheckClose(Chain(c.p), ReferenceProbabilities(kLogits, kHistory, c.p, {}, nullptr));
  }
  // Bans (min_tokens) and a constraint's mask, alone and with the rest.
  const std::vector<int32_t> banned = {7, 0};
  MultiplesOf even(2);
  for (const Case& c : cases) {
    INFO(c.name << ", with bans and a mask");
    CheckClose(Chain(c.p, banned, &even),
               ReferenceProbabilities(kLogits, kHistory, c.p, banned,
                                      [](int32_t t) { return t % 2 == 0; }));
  }
}

TEST_CASE("sampling chain: a large vocabulary matches the reference too", "[sampler][chain]") {
  // Enough tokens for the sorted blocks to grow (top_p, typical_p) and for
  // top_p's light tail to be dropped before sorting: a broad tail and a few
  // dozen likely tokens, as a model's logits.
  std::mt19937 rng(7);
  std::normal_distribution<float> tail(0.0f, 2.0f), likely(9.0f, 1.5f);
  std::vector<float> logits(6000);
  for (float& l : logits) l = tail(rng);
  for (int i = 0; i < 40; ++i) logits[rng() % logits.size()] = likely(rng);
  const std::vector<int32_t> history = {5, 17, 5, 900, 4000};
  for (const SamplingParams& p :
       {SamplingParams{.temperature = 1.0f, .top_p = 0.9f},
        SamplingParams{.temperature = 1.5f, .top_p = 0.999f},
        SamplingParams{.temperature = 3.0f, .top_p = 0.5f},
        SamplingParams{.temperature = 1.0f, .top_p = 0.95f, .top_k = 300},
        SamplingParams{.temperature = 2.0f, .typical_p = 0.9f},
        SamplingParams{.temperature = 1.0f, .min_p = 0.01f, .presence_penalty = 1.0f},
        SamplingParams{.temperature = 1.2f, .top_p = 0.97f, .min_p = 0.001f, .typical_p = 0.99f}}) {
    INFO("T " << p.temperature << " top_p " << p.top_p << " top_k " << p.top_k << " min_p "
              << p.min_p << " typical_p " << p.typical_p);
    Sampler s(p);
    s.Accept(history);
    CheckClose(s.Probabilities(s.Process(logits)),
               ReferenceProbabilities(logits, history, p, {}, nullptr));
  }
}

TEST_CASE("sampling chain: the reference is not the identity (each parameter changes p)",
          "[sampler][chain]") {
  // A reference that ignored a parameter would pass the case above for it:
  // each one changes the distribution on these logits.
  const std::vector<double> plain =
      ReferenceProbabilities(kLogits, kHistory, {.temperature = 1.0f}, {}, nullptr);
  for (const SamplingParams& p : {SamplingParams{.temperature = 1.0f, .min_p = 0.2f},
                                  SamplingParams{.temperature = 1.0f, .typical_p = 0.5f},
                                  SamplingParams{.temperature = 1.0f, .presence_penalty = 1.5f},
                                  SamplingParams{.temperature = 1.0f, .frequency_penalty = 0.8f},
                                  SamplingParams{.temperature = 1.0f, .repetition_penalty = 1.7f},
                                  SamplingParams{.temperature = 1.0f, .logit_bias = {{3, 2.0f}}}}) {
    const std::vector<double> changed = ReferenceProbabilities(kLogits, kHistory, p, {}, nullptr);
    double distance = 0;
    for (size_t t = 0; t < plain.size(); ++t) distance += std::abs(changed[t] - plain[t]);
    CHECK(distance > 0.05);
  }
}

TEST_CASE("sampling chain: greedy takes the argmax of the processed logits", "[sampler][chain]") {
  // Token 7 (3.0) is the raw argmax; 0 (2.0) next.
  auto greedy = [](const SamplingParams& p, std::span<const int32_t> banned = {},
                   TokenConstraint* rule = nullptr) {
    Sampler s(p);
    s.Accept(kHistory);
    return s.Sample(s.Process(kLogits, banned, rule));
  };
  CHECK(greedy({}) == 7);
  CHECK(greedy({.logit_bias = {{7, kLogitBiasBan}}}) == 0);
  CHECK(greedy({.logit_bias = {{11, 7.0f}}}) == 11);
  CHECK(greedy({.presence_penalty = 1.5f}) == 0);    // 7 is in the window: 3.0 - 1.5
  CHECK(greedy({.repetition_penalty = 2.0f}) == 0);  // 3.0 / 2
  CHECK(greedy({.frequency_penalty = 1.5f, .repeat_last_n = 4}) == 0);   // once in the last 4
  CHECK(greedy({.frequency_penalty = 1.5f, .repeat_last_n = 3}) == 7);   // not in the last 3
  CHECK(greedy({.frequency_penalty = 0.4f, .repeat_last_n = -1}) == 0);  // 3 times: 3.0 - 1.2
  const int32_t banned[] = {7};
  CHECK(greedy({}, banned) == 0);
  MultiplesOf thirds(3);
  CHECK(greedy({}, {}, &thirds) == 0);
  MultiplesOf fifths(5);
  const int32_t zero[] = {0};
  CHECK(greedy({}, zero, &fifths) == 10);  // 0, 5, 10 allowed; 0 banned; 10 (1.1) over 5 (-2)
  // Nothing allowed at all: no token, greedy or not.
  std::map<int32_t, float> ban_all;
  for (int32_t t = 0; t < static_cast<int32_t>(kLogits.size()); ++t) ban_all[t] = kLogitBiasBan;
  CHECK(greedy({.logit_bias = ban_all}) == Sampler::kNoToken);
  Sampler sampled({.temperature = 1.0f, .logit_bias = ban_all});
  CHECK(sampled.Sample(sampled.Process(kLogits)) == Sampler::kNoToken);
  bool took = true;
  CHECK(sampled.SampleDraft(sampled.Process(kLogits), 3, &took) == Sampler::kNoToken);
  CHECK_FALSE(took);
}

TEST_CASE("sampling chain: nothing to process leaves the row itself (no copy)",
          "[sampler][chain]") {
  Sampler plain({.temperature = 0.7f, .top_p = 0.9f, .top_k = 5, .min_p = 0.1f, .typical_p = 0.9f});
  plain.Accept(kHistory);
  CHECK(plain.Process(kLogits).data() == kLogits.data());
  // Penalties on, but nothing in the window yet: still no copy.
  Sampler fresh({.presence_penalty = 1.0f});
  CHECK(fresh.Process(kLogits).data() == kLogits.data());
  fresh.Accept(3);
  CHECK(fresh.Process(kLogits).data() != kLogits.data());
  // The input is never written.
  CHECK(kLogits[3] == 0.7f);
}

TEST_CASE("sampling chain: the penalty window counts what it holds", "[sampler][chain]") {
  PenaltyWindow w(3);
  for (int32_t t : {4, 4, 5}) w.Push(t);
  CHECK(w.counts() == std::unordered_map<int32_t, int>{{4, 2}, {5, 1}});
  w.Push(6);  // the first 4 leaves
  CHECK(w.counts() == std::unordered_map<int32_t, int>{{4, 1}, {5, 1}, {6, 1}});
  w.Push(6);
  w.Push(6);
  CHECK(w.counts() == std::unordered_map<int32_t, int>{{6, 3}});
  PenaltyWindow all(-1), none(0);
  for (int32_t t = 0; t < 1000; ++t) {
    all.Push(t % 7);
    none.Push(t);
  }
  CHECK(all.counts().size() == 7);
  CHECK(all.counts().at(0) == 143);
  CHECK(none.counts().empty());
}

TEST_CASE("sampling chain: the list and map fields are checked", "[sampler][request]") {
  GenerateRequest r;
  CHECK(AddLogitBias(int64_t{5}, -100, &r).ok());
  CHECK(AddLogitBias(std::string_view("15043"), 100, &r).ok());
  CHECK(r.sampling.logit_bias == std::map<int32_t, float>{{5, -100.0f}, {15043, 100.0f}});
  CHECK(AddLogitBias(int64_t{5}, 100.5, &r).message() ==
        "logit_bias: the bias of token 5 must be from -100 to 100");
  CHECK(AddLogitBias(int64_t{5}, NAN, &r).message() ==
        "logit_bias: the bias of token 5 must be from -100 to 100");
  CHECK(AddLogitBias(int64_t{-3}, 1, &r).message() == "logit_bias: -3 is not a token id");
  CHECK(AddLogitBias(std::string_view("x1"), 1, &r).message() ==
        "logit_bias: key 'x1' is not a token id");
  CHECK(AddLogitBias(std::string_view("+1"), 1, &r).message() ==
        "logit_bias: key '+1' is not a token id");
  CHECK(AddLogitBias(std::string_view("99999999999"), 1, &r).message() ==
        "logit_bias: key '99999999999' is not a token id");
  CHECK(AddStopTokenId(-1, &r).message() == "stop_token_ids: -1 is not a token id");
  CHECK(AddStopTokenId(7, &r).ok());
  CHECK(r.stop_token_ids == std::vector<int32_t>{7});
  CHECK(ParseLogitBiasJson(R"({"1": -100, "2": 3.5})", &r).ok());
  CHECK(r.sampling.logit_bias.at(2) == 3.5f);
  CHECK(ParseLogitBiasJson(R"({"1": "a lot"})", &r).message() ==
        "logit_bias: the bias of token 1 must be from -100 to 100");
  CHECK(ParseLogitBiasJson("[1, 2]", &r).code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParseLogitBiasJson("{", &r).code() == absl::StatusCode::kInvalidArgument);
  // A built request: the same checks.
  GenerateRequest built;
  built.sampling.logit_bias[4] = 250;
  CHECK(ValidateRequestFields(built).message() ==
        "logit_bias: the bias of token 4 must be from -100 to 100");
  built.sampling.logit_bias = {{-4, 1.0f}};
  CHECK(ValidateRequestFields(built).message() == "logit_bias: -4 is not a token id");
  built.sampling.logit_bias.clear();
  built.stop_token_ids = {3, -9};
  CHECK(ValidateRequestFields(built).message() == "stop_token_ids: -9 is not a token id");
}

}  // namespace odmoe
