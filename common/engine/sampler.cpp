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

template <typename Before>
double Sampler::KeepPrefix(Before before, double target) {
  const size_t n = candidates_.size();
  double cumulative = 0.0;
  size_t sorted = 0;
  for (size_t block = kFirstSorted; sorted < n; block *= kSortedGrowth) {
    // candidates_[0, sorted) come first, in order; bring the next block.
    const size_t upto = std::min(n, sorted + block);
    const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted);
    const auto mid = candidates_.begin() + static_cast<std::ptrdiff_t>(upto);
    if (upto < n) std::nth_element(first, mid, candidates_.end(), before);
    std::sort(first, mid, before);
    for (size_t i = sorted; i < upto; ++i) {
      cumulative += candidates_[i].weight;
      if (cumulative >= target) {
        candidates_.resize(i + 1);
        return cumulative;
      }
    }
    sorted = upto;
  }
  return cumulative;  // rounding: all of them
}

double Sampler::Weigh(std::span<const float> logits) {
  const size_t n_vocab = logits.size();
  float max_logit = kMinusInf;
  for (float l : logits) max_logit = std::max(max_logit, l);
  if (!(max_logit > kMinusInf)) return 0.0;
  const float inv_t = 1.0f / params_.temperature;
  const auto weight = [max_logit, inv_t](float l) { return std::exp((l - max_logit) * inv_t); };
  const size_t top_k = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : n_vocab;
  double mass = 0.0;
  if (top_k >= n_vocab && params_.typical_p >= 1.0f && params_.top_p >= 1.0f &&
      params_.min_p <= 0.0f) {
    // 5 only: one pass (exp(-inf) = 0 for banned and masked tokens).
    dense_ = true;
    weights_.assign(n_vocab, 0.0f);
    for (size_t i = 0; i < n_vocab; ++i) {
      if (!(logits[i] > kMinusInf)) continue;  // and NaN
      weights_[i] = weight(logits[i]);
      mass += weights_[i];
    }
    return mass;
  }
  candidates_.clear();
  const auto by_order = [](const Candidate& a, const Candidate& b) { return Before(a, b); };
  if (top_k < n_vocab) {
    // 6. top_k: one pass keeping the k most likely in a heap (the least on top).
    for (size_t i = 0; i < n_vocab; ++i) {
      if (!(logits[i] > kMinusInf)) continue;
      const Candidate c{logits[i], static_cast<int32_t>(i), 0, 0};
      if (candidates_.size() < top_k) {
        candidates_.push_back(c);
        std::push_heap(candidates_.begin(), candidates_.end(), by_order);
      } else if (Before(c, candidates_.front())) {
        std::pop_heap(candidates_.begin(), candidates_.end(), by_order);
        candidates_.back() = c;
        std::push_heap(candidates_.begin(), candidates_.end(), by_order);
      }
    }
  } else {
    // Without top_p and typical_p, min_p's cut is the most likely token's,
    // known now: tokens far below it need no weight (the exact test is 9's;
    // the margin only keeps this one looser than it).
    float lowest = kMinusInf;
    if (params_.min_p > 0.0f && params_.top_p >= 1.0f && params_.typical_p >= 1.0f) {
      lowest = max_logit + (std::log(params_.min_p) - 1e-3f) * params_.temperature;
    }
    for (size_t i = 0; i < n_vocab; ++i) {
      if (logits[i] > kMinusInf && logits[i] >= lowest) {
        candidates_.push_back({logits[i], static_cast<int32_t>(i), 0, 0});
      }
    }
  }
  // 5. temperature, on what top_k kept
  for (Candidate& c : candidates_) {
    c.weight = weight(c.logit);
    mass += c.weight;
  }
  // 7. typical_p: the tokens whose information -log p is closest to the
  // entropy H; log p from the logit, (l - max) / T - log(mass), no log per
  // token. Tokens lighter than both (1 - typical_p) * mass / (2 n) and
  // e^(-2H) * mass come last in that order (-log p > 2H, beyond every heavier
  // token's distance) and weigh less than half of what the cut leaves out:
  // never reached (as top_p's tail below), dropped before sorting.
  if (params_.typical_p < 1.0f && candidates_.size() > 1) {
    const double log_mass = std::log(mass);
    const auto log_p = [&](const Candidate& c) {
      return (static_cast<double>(c.logit) - max_logit) * inv_t - log_mass;
    };
    double entropy = 0.0;
    for (const Candidate& c : candidates_) {
      if (c.weight > 0) entropy -= c.weight / mass * log_p(c);
    }
    const double light =
        std::min(0.5 * (1.0 - params_.typical_p) * mass / static_cast<double>(candidates_.size()),
                 std::exp(-2.0 * entropy) * mass);
    std::erase_if(candidates_, [light](const Candidate& c) { return c.weight < light; });
    for (Candidate& c : candidates_) {
      c.key = c.weight > 0 ? static_cast<float>(std::abs(-log_p(c) - entropy))
                           : std::numeric_limits<float>::infinity();
    }
    mass = KeepPrefix(
        [](const Candidate& a, const Candidate& b) {
          return a.key < b.key || (a.key == b.key && Before(a, b));
        },
        params_.typical_p * mass);
  }
  // 8. top_p: the most likely tokens up to top_p of the mass. Tokens lighter
  // than (1 - top_p) * mass / (2 n) weigh less together than half of what
  // top_p leaves out: the nucleus never reaches them (had it taken one, its
  // last token would weigh less still, and the nucleus without it would
  // hold more than top_p already). They go before any sorting.
  if (params_.top_p < 1.0f) {
    const float light = static_cast<float>(0.5 * (1.0 - params_.top_p) * mass /
                                           static_cast<double>(candidates_.size()));
    std::erase_if(candidates_, [light](const Candidate& c) { return c.weight < light; });
    mass = KeepPrefix(by_order, params_.top_p * mass);
  }
  // 9. min_p: against the most likely token left.
  float top = 0.0f;
  for (const Candidate& c : candidates_) top = std::max(top, c.weight);
  const float floor = params_.min_p * top;
  std::erase_if(candidates_, [floor](const Candidate& c) { return c.weight < floor; });
  mass = 0.0;
  for (const Candidate& c : candidates_) mass += c.weight;
  // The draw walks in id order: few candidates sorted by id, many spread
  // over one weight per token.
  dense_ = candidates_.size() * 16 > n_vocab;
  if (dense_) {
    weights_.assign(n_vocab, 0.0f);
    for (const Candidate& c : candidates_) weights_[static_cast<size_t>(c.id)] = c.weight;
  } else {
    std::sort(candidates_.begin(), candidates_.end(),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  }
  return mass;
}

double Sampler::WeightOf(int32_t token) const {
  if (dense_) {
    return token >= 0 && static_cast<size_t>(token) < weights_.size()
               ? weights_[static_cast<size_t>(token)]
               : 0.0;
  }
  const auto it = std::lower_bound(candidates_.begin(), candidates_.end(), token,
                                   [](const Candidate& c, int32_t id) { return c.id < id; });
  return it != candidates_.end() && it->id == token ? it->weight : 0.0;
}

int32_t Sampler::Walk(double target, int32_t skip) const {
  double cumulative = 0.0;
  int32_t last = kNoToken;
  const auto step = [&](int32_t id, float w) {
    if (w == 0.0f || id == skip) return false;
    last = id;
    cumulative += w;
    return target < cumulative;
  };
  if (dense_) {
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (step(static_cast<int32_t>(i), weights_[i])) return last;
    }
  } else {
    for (const Candidate& c : candidates_) {
      if (step(c.id, c.weight)) return last;
    }
  }
  return last;  // rounding left the target at the top: the last token with weight
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f) {
    const int32_t best = Argmax(logits);
    return logits.empty() || !(logits[static_cast<size_t>(best)] > kMinusInf) ? kNoToken : best;
  }
  const double mass = Weigh(logits);
  if (mass <= 0.0) return kNoToken;
  return Walk(Uniform() * mass, kNoToken);
}

int32_t Sampler::SampleDraft(std::span<const float> logits, int32_t draft, bool* accepted) {
  if (params_.temperature <= 0.0f) {
    const int32_t best = Sample(logits);
    *accepted = best != kNoToken && best == draft;
    return best;
  }
  *accepted = false;
  const double mass = Weigh(logits);
  if (mass <= 0.0) return kNoToken;
  const double draft_mass = WeightOf(draft);
  // Accept with probability min(1, p(d) / q(d)) = p(d).
  if (draft_mass > 0.0 && Uniform() * mass < draft_mass) {
    *accepted = true;
    return draft;
  }
  // The residual max(0, p - q), normalized: p without the draft (p all on
  // the draft never rejects it; rounding can: then the draft).
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
  const double mass = Weigh(logits);
  if (mass <= 0.0) return p;
  for (size_t i = 0; i < p.size(); ++i) p[i] = WeightOf(static_cast<int32_t>(i)) / mass;
  return p;
}

}  // namespace odmoe
