// DyMoE's depth-aware mixed precision (workers.mixed_precision, LOSSY): how
// many of a layer's routed experts are critical (computed from the model's
// own weights); the others, sub-critical, are loaded from a lower-precision
// copy. The retention ratio falls with depth as a cosine ("slow start"):
//   r(l) = (1 - floor) (cos(pi l / (L - 1)) + 1) / 2 + floor      (DyMoE Eq. 4)
//   t_l  = ceil(r(l) k)                                            (Eq. 5)
// so the first layer keeps all k experts critical and the last ceil(floor k).
// Which experts are critical: the t_l with the largest gate weights of the
// row (ranks 0 .. t_l - 1 in RouterTopK's order: weight descending, ties to
// the lower id). Shared by the main node (who marks tasks) and the workers
// (who pick a prefetch's precision from a ranked hint).
//
//   int t = CriticalExperts(/*layer=*/31, /*n_layer=*/32, /*k=*/2, /*floor=*/0.0);   // 0 -> 1
//   bool low = ExpertRank(...) >= t;
#pragma once

namespace odmoe {

/// t_l, in [1, k] (at least the top-1 stays critical); k when n_layer <= 1.
int CriticalExperts(int layer, int n_layer, int k, double floor);

}  // namespace odmoe
