// Choosing the next token from logits: greedy, or seeded sampling with
// temperature, top-k and top-p (nucleus).
//
// Sampling is reproducible across machines: the random stream is
// std::mt19937_64 seeded with `seed`, turned into uniforms by our own
// conversion (not std::uniform_real_distribution, whose output differs
// between standard libraries).
//
// The parameters' bounds are declared with the request's other fields
// (request_fields.h), where every transport and PreparePrompt check them; a
// Sampler takes parameters already checked.
//
//   SamplingParams p{.temperature = 0.8f, .top_p = 0.95f, .seed = 42};
//   ODMOE_RETURN_IF_ERROR(ValidateRequestFields(GenerateRequest{.sampling = p}));
//   Sampler s(p);
//   int32_t next = s.Sample(logits);
//   bool took = false;
//   int32_t verified = s.SampleDraft(logits, drafted_token, &took);   // speculative decoding
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace odmoe {

/// Defaults here; bounds, names and help in request_fields.cpp (one row each).
struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // 1 = off
  int top_k = 0;             // 0 = all
  uint64_t seed = 0;
};

/// Index of the largest logit (ties: the lowest index).
int32_t Argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t Sample(std::span<const float> logits);
  /// Speculative decoding: the next token where a drafter proposed `draft`
  /// (deterministically, so its distribution q is all on `draft`). Greedy:
  /// the argmax, accepted when it is the draft. Sampling: the standard
  /// rejection rule with that q: accept the draft with probability p(draft)
  /// (p: the distribution Sample draws from), else draw from p without the
  /// draft, renormalized. The result is distributed exactly as Sample's.
  /// *accepted says whether the draft was taken.
  int32_t SampleDraft(std::span<const float> logits, int32_t draft, bool* accepted);

 private:
  // The distribution Sample draws from: candidates_[0, n) with weights
  // probs_[0, n) (unnormalized). Returns n.
  size_t Distribution(std::span<const float> logits);
  double Uniform();  // [0, 1)
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused across calls
  std::vector<double> probs_;
};

}  // namespace odmoe
