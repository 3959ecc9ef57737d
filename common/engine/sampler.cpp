#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace odmoe {

absl::Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f || temperature > 100.0f) {
    return absl::InvalidArgumentError(
        absl::StrFormat("temperature must be in [0, 100], got %g", temperature));
  }
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f) {
    return absl::InvalidArgumentError(absl::StrFormat("top_p must be in (0, 1], got %g", top_p));
  }
  if (top_k < 0)
    return absl::InvalidArgumentError(absl::StrFormat("top_k must be >= 0, got %d", top_k));
  return absl::OkStatus();
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  // Highest logit first; ties by lower id, so the order is total.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  candidates_.resize(keep);

  const double inv_t = 1.0 / params_.temperature;
  const double max_logit = candidates_.front().first;
  std::vector<double>& probs = probs_;
  probs.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((candidates_[i].first - max_logit) * inv_t);
    total += probs[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  size_t nucleus = keep;
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      cumulative += probs[i] / total;
      if (cumulative >= params_.top_p) {
        nucleus = i + 1;
        break;
      }
    }
  }
  double mass = 0.0;
  for (size_t i = 0; i < nucleus; ++i) mass += probs[i];
  const double target = Uniform() * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < nucleus; ++i) {
    cumulative += probs[i];
    if (target < cumulative) return candidates_[i].second;
  }
  return candidates_[nucleus - 1].second;
}

}  // namespace odmoe
