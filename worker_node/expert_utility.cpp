#include "worker_node/expert_utility.h"

#include <algorithm>
#include <cmath>

namespace odmoe {

ExpertUtility::ExpertUtility(int n_layer, int n_expert, Options options)
    : options_(options), n_expert_(n_expert) {
  options_.window = std::max(options_.window, 1);
  options_.levels = std::max(options_.levels, 1);
  options_.threshold = std::clamp(options_.threshold, 1, options_.levels);
  const int boundary = std::max(options_.window / 2, 1);
  layers_.resize(static_cast<size_t>(std::max(n_layer, 0)));
  for (Layer& l : layers_) {
    const size_t n = static_cast<size_t>(std::max(n_expert, 0));
    l.count.assign(n, 0);
    l.previous.assign(n, 0);
    l.utility.assign(n, 0);
    l.up.assign(n, boundary);
    l.down.assign(n, boundary);
  }
}

void ExpertUtility::Observe(int layer, Iteration iteration, std::span<const int32_t> experts) {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) return;
  Layer& l = layers_[static_cast<size_t>(layer)];
  if (l.seen && iteration == l.last) return;  // a corrected hint of the same iteration
  l.seen = true;
  l.last = iteration;
  for (int32_t e : experts) {
    if (e >= 0 && e < n_expert_) ++l.count[static_cast<size_t>(e)];
  }
  if (++l.in_cycle >= options_.window) EndCycle(l);
}

void ExpertUtility::EndCycle(Layer& l) {
  const double keep = 1.0 - options_.forgetting;
  for (size_t e = 0; e < l.count.size(); ++e) {
    const int delta = l.count[e] - l.previous[e];
    if (delta >= l.up[e]) {
      l.utility[e] = std::min(options_.levels, l.utility[e] + 1);
    } else if (-delta >= l.down[e]) {
      l.utility[e] = std::max(0, l.utility[e] - 1);
    }
    if (delta > 0) {
      l.up[e] = std::max(1, static_cast<int>(std::floor(keep * l.up[e] + options_.forgetting * delta)));
    } else if (delta < 0) {
      l.down[e] =
          std::max(1, static_cast<int>(std::floor(keep * l.down[e] - options_.forgetting * delta)));
    }
    l.previous[e] = l.count[e];
    l.count[e] = 0;
  }
  l.in_cycle = 0;
}

int ExpertUtility::utility(int layer, int expert) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size()) || expert < 0 ||
      expert >= n_expert_) {
    return 0;
  }
  return layers_[static_cast<size_t>(layer)].utility[static_cast<size_t>(expert)];
}

std::vector<std::pair<int, int>> ExpertUtility::Hot() const {
  std::vector<std::pair<int, int>> out;
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
    for (int e = 0; e < n_expert_; ++e) {
      if (hot(l, e)) out.emplace_back(l, e);
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return utility(a.first, a.second) > utility(b.first, b.second);
  });
  return out;
}

}  // namespace odmoe
