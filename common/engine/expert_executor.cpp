#include "engine/expert_executor.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace odmoe {

absl::StatusOr<RoutingPlan> RoutingPlan::Build(std::span<const int32_t> ids,
                                               std::span<const float> weights, int k,
                                               int n_expert) {
  if (k < 1 || ids.size() != weights.size() || ids.size() % static_cast<size_t>(k) != 0) {
    return absl::InvalidArgumentError("routing: ids and weights must be [n, k] arrays");
  }
  std::vector<RoutingPlan::ExpertRows> by_expert(static_cast<size_t>(n_expert));
  const size_t n = ids.size() / static_cast<size_t>(k);
  for (size_t t = 0; t < n; ++t) {
    for (int j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      if (e < 0 || e >= n_expert) {
        return absl::InvalidArgumentError(
            absl::StrFormat("routing: expert id %d out of range [0, %d)", e, n_expert));
      }
      for (int i = 0; i < j; ++i) {
        if (ids[t * k + i] == e) {
          return absl::InvalidArgumentError(
              absl::StrFormat("routing: expert %d selected twice for row %d", e, t));
        }
      }
      by_expert[static_cast<size_t>(e)].rows.push_back(static_cast<int32_t>(t));
      by_expert[static_cast<size_t>(e)].weights.push_back(weights[t * k + j]);
      by_expert[static_cast<size_t>(e)].slots.push_back(static_cast<int32_t>(t * k + j));
    }
  }
  RoutingPlan plan;
  for (int e = 0; e < n_expert; ++e) {
    auto& er = by_expert[static_cast<size_t>(e)];
    if (er.rows.empty()) continue;
    er.expert = e;
    plan.experts.push_back(std::move(er));
  }
  return plan;
}

}  // namespace odmoe
