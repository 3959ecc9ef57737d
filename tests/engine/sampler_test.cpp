#include "engine/sampler.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <map>

#include "engine/request_fields.h"

namespace odmoe {

TEST_CASE("sampler: greedy picks the largest logit, lowest id on ties", "[sampler]") {
  CHECK(Argmax(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  Sampler greedy(SamplingParams{});
  CHECK(greedy.Sample(std::vector<float>{-5.0f, -4.0f, -4.5f}) == 1);
}

// The bounds live in the request's field table (request_fields.h).
absl::Status Validate(const SamplingParams& p) {
  return ValidateRequestFields(GenerateRequest{.sampling = p});
}

TEST_CASE("sampler: parameters are validated", "[sampler]") {
  CHECK(Validate(SamplingParams{-0.1f}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Validate(SamplingParams{NAN}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Validate(SamplingParams{0.7f, 0.0f}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Validate(SamplingParams{0.7f, 1.5f}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Validate(SamplingParams{0.7f, 0.9f, -2}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(Validate(SamplingParams{0.7f, 0.9f, -1}).ok());  // vLLM's "all", as 0
  CHECK(Validate(SamplingParams{0.7f, 0.9f, 40, 3}).ok());
}

TEST_CASE("sampler: the same seed gives the same tokens", "[sampler]") {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  Sampler a(SamplingParams{1.0f, 1.0f, 0, 123}), b(SamplingParams{1.0f, 1.0f, 0, 123});
  Sampler c(SamplingParams{1.0f, 1.0f, 0, 124});
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const int32_t x = a.Sample(logits);
    CHECK(x == b.Sample(logits));
    differ += x != c.Sample(logits);
  }
  CHECK(differ > 0);
}

TEST_CASE("sampler: top-k 1 and a tiny top-p are greedy", "[sampler]") {
  const std::vector<float> logits = {0.5f, 2.0f, 1.9f, -1.0f};
  Sampler k1(SamplingParams{5.0f, 1.0f, 1, 9});
  Sampler p(SamplingParams{5.0f, 1e-6f, 0, 9});
  for (int i = 0; i < 50; ++i) {
    CHECK(k1.Sample(logits) == 1);
    CHECK(p.Sample(logits) == 1);
  }
}

TEST_CASE("sampler: frequencies follow softmax(logits / T)", "[sampler]") {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f};
  const float t = 0.5f;
  Sampler s(SamplingParams{t, 1.0f, 0, 2024});
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits)];
  double z = 0;
  for (float l : logits) z += std::exp(l / t);
  for (int32_t id = 0; id < 3; ++id) {
    const double p = std::exp(logits[id] / t) / z;
    const double sigma = std::sqrt(n * p * (1 - p));
    INFO("token " << id);
    CHECK(std::abs(counts[id] - n * p) < 5 * sigma + 1);
  }
}

TEST_CASE("sampler: top-p keeps the smallest nucleus reaching p", "[sampler]") {
  // probabilities ~ {0.6, 0.3, 0.1}: top_p 0.8 keeps the first two only.
  const std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  Sampler s(SamplingParams{1.0f, 0.8f, 0, 5});
  for (int i = 0; i < 2000; ++i) CHECK(s.Sample(logits) != 2);
}

}  // namespace odmoe

namespace odmoe {
namespace {

// The distribution Sample draws from, computed the long way (softmax with
// temperature over the top-k, cut to the nucleus, renormalized).
std::vector<double> TargetDistribution(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<float, int>> order;
  for (size_t i = 0; i < logits.size(); ++i) order.emplace_back(logits[i], static_cast<int>(i));
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && order.size() > static_cast<size_t>(p.top_k)) order.resize(p.top_k);
  std::vector<double> w;
  double total = 0;
  for (const auto& [l, id] : order) {
    w.push_back(std::exp((l - order.front().first) / p.temperature));
    total += w.back();
  }
  size_t keep = w.size();
  double cum = 0;
  for (size_t i = 0; i < w.size() && p.top_p < 1.0f; ++i) {
    cum += w[i] / total;
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += w[i];
  std::vector<double> dist(logits.size(), 0.0);
  for (size_t i = 0; i < keep; ++i) dist[static_cast<size_t>(order[i].second)] = w[i] / mass;
  return dist;
}

}  // namespace

TEST_CASE("sampler: a verified draft leaves the output distribution exactly the target's",
          "[sampler][speculative]") {
  // Speculative decoding's rejection rule with a deterministic drafter:
  // accept the draft with probability p(draft), else sample p without it.
  // Over many draws the tokens follow p whichever token was drafted, and the
  // draft is taken with probability p(draft). A small vocabulary, so every
  // token's frequency is checked (N = 200000: one standard deviation is at
  // most 0.0012, the tolerance 0.006; the seed is fixed, so this never flakes).
  const std::vector<float> logits = {1.2f, 0.3f, 2.0f, -0.5f, 1.9f, 0.0f};
  const SamplingParams params = GENERATE(SamplingParams{0.9f, 1.0f, 0, 17},
                                         SamplingParams{1.3f, 0.8f, 0, 18},
                                         SamplingParams{0.7f, 1.0f, 4, 19});
  const std::vector<double> p = TargetDistribution(logits, params);
  const int32_t draft = GENERATE(2, 0, 3);  // likely, middling, outside top-k / nucleus
  INFO("temperature " << params.temperature << " top_p " << params.top_p << " top_k "
                      << params.top_k << ", draft " << draft);
  Sampler s(params);
  const int n = 200000;
  std::vector<int> count(logits.size(), 0);
  int taken = 0, inconsistent = 0;
  for (int i = 0; i < n; ++i) {
    bool accepted = false;
    const int32_t t = s.SampleDraft(logits, draft, &accepted);
    REQUIRE((t >= 0 && t < static_cast<int32_t>(logits.size())));
    inconsistent += accepted != (t == draft) ? 1 : 0;
    ++count[static_cast<size_t>(t)];
    taken += accepted ? 1 : 0;
  }
  CHECK(inconsistent == 0);
  for (size_t t = 0; t < logits.size(); ++t) {
    INFO("token " << t);
    CHECK(static_cast<double>(count[t]) / n == Approx(p[t]).margin(0.006));
  }
  CHECK(static_cast<double>(taken) / n == Approx(p[static_cast<size_t>(draft)]).margin(0.006));
}

TEST_CASE("sampler: greedy verification is the argmax, accepted only when it is the draft",
          "[sampler][speculative]") {
  Sampler greedy(SamplingParams{});
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f};
  bool accepted = true;
  CHECK(greedy.SampleDraft(logits, 2, &accepted) == 1);
  CHECK_FALSE(accepted);
  CHECK(greedy.SampleDraft(logits, 1, &accepted) == 1);
  CHECK(accepted);
}

}  // namespace odmoe
