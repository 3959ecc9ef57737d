// The sampling chain of engine/sampler.h written the long way, for tests:
// dense rows, full sorts, the penalty window counted by scanning the history.
// It follows the chain's documented definition, not Sampler's code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace odmoe::test {

/// A vocabulary of 8 for Sequence tests: <unk>, <s>, </s> (EOS, 2), a..e (3..7).
inline const Tokenizer& EightTokenTokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    TokenizerVocab v;
    v.tokens = {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"};
    v.scores.assign(v.tokens.size(), 0.0f);
    v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                     TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
                     TokenType::kNormal,  TokenType::kNormal};
    v.unk_id = 0;
    v.bos_id = 1;
    v.eos_id = 2;
    return Tokenizer::Create(v).value();
  }();
  return *tok;
}

/// Whether a constraint allows a token (null: all).
using AllowedToken = std::function<bool(int32_t)>;

/// Steps 1-4: logit_bias, penalties over the last repeat_last_n tokens of
/// `history`, `banned`, then the tokens `allowed` refuses. Float, as the row is.
inline std::vector<float> ReferenceProcess(const std::vector<float>& logits,
                                           const std::vector<int32_t>& history,
                                           const SamplingParams& p,
                                           const std::vector<int32_t>& banned,
                                           const AllowedToken& allowed) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> l = logits;
  for (const auto& [id, bias] : p.logit_bias) {
    l[static_cast<size_t>(id)] = bias == -100.0f ? minus_inf : l[static_cast<size_t>(id)] + bias;
  }
  const size_t n = history.size();
  const size_t window =
      p.repeat_last_n < 0 ? n : std::min<size_t>(n, static_cast<size_t>(p.repeat_last_n));
  for (size_t t = 0; t < l.size(); ++t) {
    int count = 0;
    for (size_t i = n - window; i < n; ++i) count += history[i] == static_cast<int32_t>(t) ? 1 : 0;
    if (count == 0) continue;
    if (l[t] > 0) {
      l[t] = l[t] / p.repetition_penalty;
    } else {
      l[t] = l[t] * p.repetition_penalty;
    }
    l[t] -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
  for (int32_t b : banned) l[static_cast<size_t>(b)] = minus_inf;
  if (allowed) {
    for (size_t t = 0; t < l.size(); ++t) {
      if (!allowed(static_cast<int32_t>(t))) l[t] = minus_inf;
    }
  }
  return l;
}

/// Steps 5-10 on processed logits: the probability of each token.
inline std::vector<double> ReferenceDistribution(const std::vector<float>& l,
                                                 const SamplingParams& p) {
  std::vector<double> out(l.size(), 0.0);
  std::vector<int32_t> ids;
  for (size_t t = 0; t < l.size(); ++t) {
    if (l[t] > -std::numeric_limits<float>::infinity()) ids.push_back(static_cast<int32_t>(t));
  }
  if (ids.empty()) return out;
  auto before = [&l](int32_t a, int32_t b) {
    return l[static_cast<size_t>(a)] > l[static_cast<size_t>(b)] ||
           (l[static_cast<size_t>(a)] == l[static_cast<size_t>(b)] && a < b);
  };
  std::sort(ids.begin(), ids.end(), before);
  if (p.temperature <= 0) {
    out[static_cast<size_t>(ids.front())] = 1.0;
    return out;
  }
  if (p.top_k > 0 && ids.size() > static_cast<size_t>(p.top_k))
    ids.resize(static_cast<size_t>(p.top_k));
  const double top_logit = l[static_cast<size_t>(ids.front())];
  std::map<int32_t, double> w;
  auto mass = [&] {
    double m = 0;
    for (int32_t id : ids) m += w[id];
    return m;
  };
  for (int32_t id : ids) w[id] = std::exp((l[static_cast<size_t>(id)] - top_logit) / p.temperature);
  if (p.typical_p < 1.0f) {
    const double total = mass();
    double entropy = 0;
    for (int32_t id : ids) {
      const double q = w[id] / total;
      if (q > 0) entropy -= q * std::log(q);
    }
    auto distance = [&](int32_t id) {
      const double q = w[id] / total;
      return q > 0 ? std::abs(-std::log(q) - entropy) : std::numeric_limits<double>::infinity();
    };
    std::vector<int32_t> typical = ids;
    std::stable_sort(typical.begin(), typical.end(),
                     [&](int32_t a, int32_t b) { return distance(a) < distance(b); });
    double cumulative = 0;
    size_t keep = typical.size();
    for (size_t i = 0; i < typical.size(); ++i) {
      cumulative += w[typical[i]] / total;
      if (cumulative >= p.typical_p) {
        keep = i + 1;
        break;
      }
    }
    typical.resize(keep);
    std::sort(typical.begin(), typical.end(), before);
    ids = typical;
  }
  if (p.top_p < 1.0f) {
    const double total = mass();
    double cumulative = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cumulative += w[ids[i]] / total;
      if (cumulative >= p.top_p) {
        ids.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0) {
    double top = 0;
    for (int32_t id : ids) top = std::max(top, w[id]);
    std::vector<int32_t> kept;
    for (int32_t id : ids) {
      if (w[id] >= p.min_p * top) kept.push_back(id);
    }
    ids = kept;
  }
  const double total = mass();
  for (int32_t id : ids) out[static_cast<size_t>(id)] = w[id] / total;
  return out;
}

inline std::vector<double> ReferenceProbabilities(const std::vector<float>& logits,
                                                  const std::vector<int32_t>& history,
                                                  const SamplingParams& p,
                                                  const std::vector<int32_t>& banned,
                                                  const AllowedToken& allowed) {
  return ReferenceDistribution(ReferenceProcess(logits, history, p, banned, allowed), p);
}

}  // namespace odmoe::test
