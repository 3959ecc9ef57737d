#include "engine/sampler.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

namespace odmoe {

TEST_CASE("sampler: greedy picks the largest logit, lowest id on ties", "[sampler]") {
  CHECK(Argmax(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  Sampler greedy(SamplingParams{});
  CHECK(greedy.Sample(std::vector<float>{-5.0f, -4.0f, -4.5f}) == 1);
}

TEST_CASE("sampler: parameters are validated", "[sampler]") {
  CHECK(SamplingParams{-0.1f}.Validate().code() == absl::StatusCode::kInvalidArgument);
  CHECK(SamplingParams{NAN}.Validate().code() == absl::StatusCode::kInvalidArgument);
  CHECK(SamplingParams{0.7f, 0.0f}.Validate().code() == absl::StatusCode::kInvalidArgument);
  CHECK(SamplingParams{0.7f, 1.5f}.Validate().code() == absl::StatusCode::kInvalidArgument);
  CHECK(SamplingParams{0.7f, 0.9f, -1}.Validate().code() == absl::StatusCode::kInvalidArgument);
  CHECK(SamplingParams{0.7f, 0.9f, 40, 3}.Validate().ok());
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
