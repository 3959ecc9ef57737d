// The teacher-forced score of one row of logits, the one definition every
// backend's Backend::ScoreLogitRows gives (and engine/scoring.h builds on):
//
//   top1   = the lowest id of the largest logit (NaN logits are never
//            larger; a row whose first logit is NaN gives 0), the token greedy
//            generation picks;
//   logprob(target) = (double)l[target] - (double)l[top1]
//                     - log(sum_v exp((double)l[v] - (double)l[top1]))
//            with the sum taken in double in vocabulary order (libm's exp and
//            log: the same bits on every machine with the same libm); 0 when
//            target is outside [0, n).
//
//   LogitRowScore s = ScoreLogitRow(row.data(), n_vocab, next_token);
//   // s.top1, s.target_logprob
#pragma once

#include <cmath>
#include <cstdint>

namespace odmoe {

struct LogitRowScore {
  int32_t top1 = -1;
  double target_logprob = 0;
  double log_sum = 0;  // log(sum_v exp(l[v] - l[top1])): logprob(v) = l[v] - l[top1] - log_sum
};

/// The lowest index of the largest of x[0 .. n) (n >= 1; see the top for
/// NaN): the largest value in a first pass of 16 independent maxima (which
/// vectorizes), then its first index.
inline int32_t ArgmaxOf(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  for (float& l : lane) l = x[0];
  int64_t i = 1;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float best = lane[0];
  for (int j = 1; j < kLanes; ++j) best = lane[j] > best ? lane[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int64_t k = 0; k < n; ++k) {
    if (x[k] == best) return static_cast<int32_t>(k);
  }
  return 0;  // x[0] is NaN
}

/// The score of one row of n >= 1 logits (see the top).
inline LogitRowScore ScoreLogitRow(const float* logits, int64_t n, int32_t target) {
  LogitRowScore r;
  r.top1 = ArgmaxOf(logits, n);
  const double max_logit = logits[r.top1];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  r.log_sum = std::log(sum);
  if (target >= 0 && target < n) {
    r.target_logprob = static_cast<double>(logits[target]) - max_logit - r.log_sum;
  }
  return r;
}

}  // namespace odmoe
