// Choosing the next token from logits: greedy, or seeded sampling with
// temperature, top-k and top-p (nucleus).
//
// Sampling is reproducible across machines: the random stream is
// std::mt19937_64 seeded with `seed`, turned into uniforms by our own
// conversion (not std::uniform_real_distribution, whose output differs
// between standard libraries).
//
//   SamplingParams p{.temperature = 0.8f, .top_p = 0.95f, .seed = 42};
//   ODMOE_RETURN_IF_ERROR(p.Validate());
//   Sampler s(p);
//   int32_t next = s.Sample(logits);
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace odmoe {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = all
  uint64_t seed = 0;

  /// INVALID_ARGUMENT naming the parameter when out of range
  /// (temperature in [0, 100], top_p in (0, 1], top_k >= 0).
  absl::Status Validate() const;
};

/// Index of the largest logit (ties: the lowest index).
int32_t Argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t Sample(std::span<const float> logits);

 private:
  double Uniform();  // [0, 1)
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused across calls
  std::vector<double> probs_;
};

}  // namespace odmoe
