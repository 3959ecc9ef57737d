#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/logit_scores.h"

namespace odmoe {
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// The draw order: the higher logit first, ties by the lower id (a total order).
template <typename C>
bool Before(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The first sorted block of the draw; each further one is this many times larger.
constexpr size_t kFirstSorted = 64;
constexpr size_t kSortedGrowth = 8;

}  // namespace

int32_t Argmax(std::span<const float> logits) {
  return logits.empty() ? 0 : ArgmaxOf(logits.data(), static_cast<int64_t>(logits.size()));
}

PenaltyWindow::PenaltyWindow(int last_n) : last_n_(last_n) {
  if (last_n_ > 0) ring_.reserve(static_cast<size_t>(std::min(last_n_, 1 << 16)));
}

void PenaltyWindow::Push(int32_t token) {
  if (last_n_ == 0) return;
  ++counts_[token];
  if (last_n_ < 0) return;  // the whole context: nothing leaves
  if (ring_.size() < static_cast<size_t>(last_n_)) {
    ring_.push_back(token);
    return;
  }
  int32_t& oldest = ring_[head_];
  if (auto it = counts_.find(oldest); it != counts_.end() && --it->second == 0) counts_.erase(it);
  oldest = token;
  head_ = (head_ + 1) % ring_.size();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params),
      rng_(params.seed),
      window_(params.penalties_on() ? params.repeat_last_n : 0) {}

double Sampler::Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::Accept(int32_t token) { window_.Push(token); }

void Sampler::Accept(std::span<const int32_t> tokens) {
  if (!params_.penalties_on()) return;
  // Only the last repeat_last_n can be in the window.
  if (params_.repeat_last_n > 0 && tokens.size() > static_cast<size_t>(params_.repeat_last_n)) {
    tokens = tokens.last(static_cast<size_t>(params_.repeat_last_n));
  }
  for (int32_t t : tokens) window_.Push(t);
}

std::span<const float> Sampler::Process(std::span<const float> logits,
                                        std::span<const int32_t> banned,
                                        TokenConstraint* constraint) {
  const bool penalize = params_.penalties_on() && !window_.counts().empty();
  if (params_.logit_bias.empty() && !penalize && banned.empty() && constraint == nullptr) {
    return logits;
  }
  processed_.assign(logits.begin(), logits.end());
  const auto in_vocab = [n = processed_.size()](int32_t id) {
    return id >= 0 && static_cast<size_t>(id) < n;
  };
  for (const auto& [id, bias] : params_.logit_bias) {
    if (!in_vocab(id)) continue;
    float& l = processed_[static_cast<size_t>(id)];
    l = bias <= kLogitBiasBan ? kMinusInf : l + bias;
  }
  if (penalize) {
    const float r = params_.repetition_penalty;
    for (const auto& [id, count] : window_.counts()) {
      if (!in_vocab(id)) continue;
      float& l = processed_[static_cast<size_t>(id)];
      if (r != 1.0f) l = l > 0 ? l / r : l * r;
      l -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
    }
  }
  for (int32_t id : banned) {
    if (in_vocab(id)) processed_[static_cast<size_t>(id)] = kMinusInf;
  }
  if (constraint != nullptr) constraint->MaskLogits(processed_);
  return processed_;
}

void Sampler::SortUpTo(size_t upto) {
  const size_t n = candidates_.size();
  upto = std::min(upto, n);
  if (upto <= sorted_) return;
  const auto by_order = [](const Candidate& a, const Candidate& b) { return Before(a, b); };
  auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted_);
  auto mid = candidates_.begin() + static_cast<std::ptrdiff_t>(upto);
  // Everything before sorted_ already comes before the rest.
  if (upto < n) std::nth_element(first, mid, candidates_.end(), by_order);
  std::sort(first, mid, by_order);
  sorted_ = upto;
}

size_t Sampler::Truncate(std::span<const float> logits) {
  candidates_.clear();
  sorted_ = 0;
  float max_logit = kMinusInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    // Banned and masked tokens (and NaN) are never candidates.
    if (!(logits[i] > kMinusInf)) continue;
    candidates_.push_back({logits[i], static_cast<int32_t>(i), 0.0});
    max_logit = std::max(max_logit, logits[i]);
  }
  if (candidates_.empty()) return 0;
  // 6. top_k
  if (params_.top_k > 0 && candidates_.size() > static_cast<size_t>(params_.top_k)) {
    SortUpTo(static_cast<size_t>(params_.top_k));
    candidates_.resize(static_cast<size_t>(params_.top_k));
  }
  // 5. temperature (on what top_k kept: the same weights, fewer of them)
  const double inv_t = 1.0 / params_.temperature;
  double mass = 0.0;
  for (Candidate& c : candidates_) {
    c.weight = std::exp((static_cast<double>(c.logit) - max_logit) * inv_t);
    mass += c.weight;
  }
  // 7. typical_p: by the distance of each token's information from the
  // entropy, the smallest set reaching typical_p; then back to draw order.
  if (params_.typical_p < 1.0f && candidates_.size() > 1) {
    double entropy = 0.0;
    for (const Candidate& c : candidates_) {
      const double p = c.weight / mass;
      if (p > 0) entropy -= p * std::log(p);
    }
    std::vector<std::pair<double, size_t>> by_typicality;
    by_typicality.reserve(candidates_.size());
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const double p = candidates_[i].weight / mass;
      const double surprise = p > 0 ? -std::log(p) : std::numeric_limits<double>::infinity();
      by_typicality.emplace_back(std::abs(surprise - entropy), i);
    }
    std::sort(by_typicality.begin(), by_typicality.end(), [this](const auto& a, const auto& b) {
      return a.first < b.first ||
             (a.first == b.first && Before(candidates_[a.second], candidates_[b.second]));
    });
    double cumulative = 0.0;
    size_t keep = by_typicality.size();
    for (size_t i = 0; i < by_typicality.size(); ++i) {
      cumulative += candidates_[by_typicality[i].second].weight;
      if (cumulative >= params_.typical_p * mass) {
        keep = i + 1;
        break;
      }
    }
    std::vector<Candidate> kept;
    kept.reserve(keep);
    for (size_t i = 0; i < keep; ++i) kept.push_back(candidates_[by_typicality[i].second]);
    std::sort(kept.begin(), kept.end(),
              [](const Candidate& a, const Candidate& b) { return Before(a, b); });
    candidates_ = std::move(kept);
    sorted_ = candidates_.size();
    mass = cumulative;
  }
  // 8. top_p: the smallest most likely prefix reaching top_p.
  if (params_.top_p < 1.0f) {
    const double target = params_.top_p * mass;
    double cumulative = 0.0;
    size_t keep = candidates_.size();
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (i == sorted_) SortUpTo(std::max(kFirstSorted, sorted_ * kSortedGrowth));
      cumulative += candidates_[i].weight;
      if (cumulative >= target) {
        keep = i + 1;
        break;
      }
    }
    candidates_.resize(keep);
    sorted_ = std::min(sorted_, keep);
  }
  // 9. min_p: against the most likely token left (always kept).
  if (params_.min_p > 0.0f) {
    double top = 0.0;
    for (const Candidate& c : candidates_) top = std::max(top, c.weight);
    const double floor = params_.min_p * top;
    size_t out = 0, sorted_left = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (candidates_[i].weight < floor) continue;
      if (i < sorted_) ++sorted_left;  // order kept: the sorted ones stay first
      candidates_[out++] = candidates_[i];
    }
    candidates_.resize(out);
    sorted_ = sorted_left;
  }
  return candidates_.size();
}

int32_t Sampler::Walk(double target, int32_t skip) {
  double cumulative = 0.0;
  size_t last = candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (i == sorted_) SortUpTo(std::max(kFirstSorted, sorted_ * kSortedGrowth));
    if (candidates_[i].id == skip) continue;
    last = i;
    cumulative += candidates_[i].weight;
    if (target < cumulative) return candidates_[i].id;
  }
  // Rounding left the target at the top: the last candidate.
  return last < candidates_.size() ? candidates_[last].id : kNoToken;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) {
    const int32_t best = Argmax(logits);
    return logits.empty() || !(logits[static_cast<size_t>(best)] > kMinusInf) ? kNoToken : best;
  }
  if (Truncate(logits) == 0) return kNoToken;
  double mass = 0.0;
  for (const Candidate& c : candidates_) mass += c.weight;
  return Walk(Uniform() * mass, kNoToken);
}

int32_t Sampler::SampleDraft(std::span<const float> logits, int32_t draft, bool* accepted) {
  if (params_.temperature <= 0.0f) {
    const int32_t best = Sample(logits);
    *accepted = best != kNoToken && best == draft;
    return best;
  }
  *accepted = false;
  const size_t n = Truncate(logits);
  if (n == 0) return kNoToken;
  double mass = 0.0, draft_mass = 0.0;
  size_t draft_at = n;
  for (size_t i = 0; i < n; ++i) {
    mass += candidates_[i].weight;
    if (candidates_[i].id == draft) {
      draft_mass = candidates_[i].weight;
      draft_at = i;
    }
  }
  // Accept with probability min(1, p(d) / q(d)) = p(d).
  if (draft_at < n && Uniform() * mass < draft_mass) {
    *accepted = true;
    return draft;
  }
  // The residual max(0, p - q), normalized: p without the draft. (p all on
  // the draft never rejects it; rounding at the top returns it below.)
  const int32_t next = Walk(Uniform() * (mass - draft_mass), draft);
  return next == kNoToken ? draft : next;
}

std::vector<double> Sampler::Probabilities(std::span<const float> logits) {
  std::vector<double> p(logits.size(), 0.0);
  if (params_.temperature <= 0.0f) {
    const int32_t best = Sample(logits);
    if (best != kNoToken) p[static_cast<size_t>(best)] = 1.0;
    return p;
  }
  const size_t n = Truncate(logits);
  double mass = 0.0;
  for (size_t i = 0; i < n; ++i) mass += candidates_[i].weight;
  for (size_t i = 0; i < n; ++i) p[static_cast<size_t>(candidates_[i].id)] = candidates_[i].weight / mass;
  return p;
}

}  // namespace odmoe
