// Shared by the golden tests: replays a golden case through a Transformer
// step by step (the prompt, then each greedy token) and compares logits
// with a tolerance, keeping the largest difference seen.
//
//   LogitTolerance tol{1e-4, 1e-5};
//   ReplayGreedySteps(*tf, *experts, golden_case, [&](size_t step, const std::vector<float>& l) {
//     for (const auto& pair : golden_case["top5"][step]) tol.Check(l[pair[0]], pair[1]);
//   });
//   WARN("largest difference: " << tol.worst);
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "backend_registry.h"
#include "engine/local_expert_executor.h"
#include "engine/transformer.h"
#include "nlohmann/json.hpp"

namespace odmoe::test {

/// A CPU transformer with local experts over `model`, for replaying cases.
struct LocalForward {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> tf;
  std::unique_ptr<LocalExpertExecutor> experts;
};

inline LocalForward MakeLocalForward(const ModelFile& model) {
  LocalForward f;
  auto backend = CreateBackend("cpu");
  REQUIRE(backend.ok());
  f.backend = std::move(backend).value();
  auto tf = Transformer::Create(model, *f.backend, {});
  REQUIRE(tf.ok());
  f.tf = std::move(tf).value();
  auto experts = LocalExpertExecutor::Create(model, *f.backend, f.tf->n_batch());
  REQUIRE(experts.ok());
  f.experts = std::move(experts).value();
  return f;
}

/// |got - want| <= abs + rel * |want|, as a CHECK; remembers the largest error.
struct LogitTolerance {
  double abs = 0, rel = 0;
  double worst = 0;
  void Check(double got, double want) {
    const double err = std::abs(got - want);
    worst = std::max(worst, err);
    CHECK(err <= abs + rel * std::abs(want));
  }
};

/// Runs `golden_case["prompt_ids"]` from position 0, then feeds
/// `golden_case["greedy_ids"]` one at a time, calling `at_step(step, logits)`
/// with the last row's logits before each of the case's "top5" steps.
inline void ReplayGreedySteps(Transformer& tf, ExpertExecutor& experts,
                              const nlohmann::json& golden_case,
                              const std::function<void(size_t, const std::vector<float>&)>& at_step) {
  const auto prompt = golden_case["prompt_ids"].get<std::vector<int32_t>>();
  const auto greedy = golden_case["greedy_ids"].get<std::vector<int32_t>>();
  const size_t steps = golden_case["top5"].size();
  std::vector<float> logits;
  REQUIRE(tf.Forward(prompt, 0, experts, &logits, nullptr).ok());
  int pos = static_cast<int>(prompt.size());
  for (size_t step = 0; step < steps; ++step) {
    INFO("step " << step);
    at_step(step, logits);
    if (step + 1 < steps) {
      const int32_t next[1] = {greedy[step]};
      REQUIRE(tf.Forward(next, pos++, experts, &logits, nullptr).ok());
    }
  }
}

}  // namespace odmoe::test
