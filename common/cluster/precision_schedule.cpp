#include "cluster/precision_schedule.h"

#include <algorithm>
#include <cmath>

namespace odmoe {

int CriticalExperts(int layer, int n_layer, int k, double floor) {
  if (k <= 1 || n_layer <= 1) return std::max(k, 1);
  const double f = std::clamp(floor, 0.0, 1.0);
  const double depth = static_cast<double>(std::clamp(layer, 0, n_layer - 1)) / (n_layer - 1);
  const double r = (1.0 - f) * (std::cos(M_PI * depth) + 1.0) / 2.0 + f;
  // A hair below the exact product: cos() of the ends is not always exact.
  const int t = static_cast<int>(std::ceil(r * k - 1e-9));
  return std::clamp(t, 1, k);
}

}  // namespace odmoe
