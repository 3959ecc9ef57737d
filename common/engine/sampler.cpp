#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "backend/logit_scores.h"

namespace odmoe {

int32_t Argmax(std::span<const float> logits) {
  return logits.empty() ? 0 : ArgmaxOf(logits.data(), static_cast<int64_t>(logits.size()));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

size_t Sampler::Distribution(std::span<const float> logits) {
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
  return nucleus;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) return Argmax(logits);
  const size_t nucleus = Distribution(logits);
  double mass = 0.0;
  for (size_t i = 0; i < nucleus; ++i) mass += probs_[i];
  const double target = Uniform() * mass;
  double cumulative = 0.0;
  for (size_t i = 0; i < nucleus; ++i) {
    cumulative += probs_[i];
    if (target < cumulative) return candidates_[i].second;
  }
  return candidates_[nucleus - 1].second;
}

int32_t Sampler::SampleDraft(std::span<const float> logits, int32_t draft, bool* accepted) {
  if (params_.temperature <= 0.0f) {
    const int32_t best = Argmax(logits);
    *accepted = best == draft;
    return best;
  }
  const size_t nucleus = Distribution(logits);
  double mass = 0.0, draft_mass = 0.0;
  size_t draft_at = nucleus;
  for (size_t i = 0; i < nucleus; ++i) {
    mass += probs_[i];
    if (candidates_[i].second == draft) {
      draft_mass = probs_[i];
      draft_at = i;
    }
  }
  // Accept with probability min(1, p(d) / q(d)) = p(d).
  if (draft_at < nucleus && Uniform() * mass < draft_mass) {
    *accepted = true;
    return draft;
  }
  *accepted = false;
  // The residual max(0, p - q), normalized: p without the draft.
  const double rest = mass - draft_mass;
  const double target = Uniform() * rest;
  double cumulative = 0.0;
  size_t last = nucleus;
  for (size_t i = 0; i < nucleus; ++i) {
    if (i == draft_at) continue;
    last = i;
    cumulative += probs_[i];
    if (target < cumulative) return candidates_[i].second;
  }
  // Rounding left the target at the top (or p was all on the draft, which
  // then is never rejected): the last candidate that is not the draft.
  return last < nucleus ? candidates_[last].second : draft;
}

}  // namespace odmoe
