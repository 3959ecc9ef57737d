// MoE-SpAc's Speculative Utility Estimation (its Algorithm 1), the score a
// utility-driven expert cache (workers.mode: utility_cache) keeps and evicts
// by. The predictor's view of the coming iterations feeds it: the experts a
// worker is hinted for each iteration of a layer (the shadow's predictions,
// or its drafted tokens' under speculative decoding). Iterations are taken in
// cycles of `window` (the paper's gamma); after each cycle, every expert's
// frequency f in it (how many of the cycle's iterations named it) is compared
// with the previous cycle's:
//   delta = f_t - f_{t-1}
//   delta >= up[e]       -> utility[e] = min(levels, utility[e] + 1)
//   -delta >= down[e]    -> utility[e] = max(0, utility[e] - 1)
//   delta > 0: up[e]   = floor((1 - forgetting) up[e]   + forgetting delta)
//   delta < 0: down[e] = floor((1 - forgetting) down[e] + forgetting |delta|)
// (boundaries start at floor(window / 2), never below 1). An expert is hot
// when its utility reaches `threshold`: the cache admits hot experts, the
// highest utility first, and evicts the lowest utility first. The paper
// solves the threshold per layer from a CPU / GPU workload balance; a worker
// here has no CPU path to balance against, so it is a setting.
//
//   ExpertUtility u(/*n_layer=*/32, /*n_expert=*/8, {});
//   u.Observe(/*layer=*/4, /*iteration=*/{1, 17}, {3});   // request 1, token 17: expert 3
//   int s = u.utility(4, 3);
//   std::vector<std::pair<int, int>> hot = u.Hot();   // (layer, expert), hottest first
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace odmoe {

class ExpertUtility {
 public:
  struct Options {
    int window = 8;           // gamma: iterations per cycle (>= 1)
    int levels = 4;           // K: utilities are 0..K (>= 1)
    int threshold = 1;        // tau: hot at utility >= tau (1..K)
    double forgetting = 0.1;  // lambda of the boundaries' calibration
  };
  /// An iteration of a layer: (request, token).
  using Iteration = std::pair<uint64_t, uint32_t>;

  ExpertUtility(int n_layer, int n_expert, Options options);

  /// The experts hinted for `layer` at `iteration`. Repeats of the same
  /// iteration (a corrected hint) are not counted again.
  void Observe(int layer, Iteration iteration, std::span<const int32_t> experts);
  int utility(int layer, int expert) const;
  bool hot(int layer, int expert) const { return utility(layer, expert) >= options_.threshold; }
  /// Hot experts as (layer, expert), the highest utility first, then by layer
  /// and expert.
  std::vector<std::pair<int, int>> Hot() const;
  const Options& options() const { return options_; }

 private:
  struct Layer {
    Iteration last{0, 0};
    bool seen = false;
    int in_cycle = 0;                  // iterations of the current cycle so far
    std::vector<int> count, previous;  // f_t (being counted), f_{t-1}
    std::vector<int> utility, up, down;
  };
  void EndCycle(Layer& l);

  Options options_;
  int n_expert_;
  std::vector<Layer> layers_;
};

}  // namespace odmoe
