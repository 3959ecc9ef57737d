// What the main node counts, rendered in the Prometheus text format for
// GET /metrics (docs/operations.md lists every series). Thread-safe.
//
//   metrics.RequestStarted();  ...  metrics.RequestFinished(result);
//   metrics.ObserveInterToken(seconds);
//   std::string text = metrics.Render(queue_running, queue_waiting, worker_lines);
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "main_node/main_engine.h"

namespace odmoe {

/// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  /// `name`_bucket{le=...}, _sum and _count lines.
  void Render(const std::string& name, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), plus +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MainMetrics {
 public:
  explicit MainMetrics(int n_layer);

  /// `api`: "http" | "grpc"; `outcome`: "ok" | an error kind ("invalid",
  /// "busy", "cancelled", "unavailable", "error").
  void RequestDone(const std::string& api, const std::string& outcome);
  void Generation(const ClusterGenerateResult& r);
  void ObserveInterToken(double seconds);

  /// The whole exposition. `extra` is appended as is (per-worker series the
  /// caller gathers from the workers).
  std::string Render(int running, int waiting, const std::string& extra) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  uint64_t hits_ = 0, misses_ = 0, reloads_ = 0;
  uint64_t recall_correct_ = 0, recall_slots_ = 0;
  double last_recall_ = 0;
  double alignment_seconds_ = 0;
  std::vector<double> stall_per_layer_;
  Histogram ttft_;
  Histogram inter_token_;
};

}  // namespace odmoe
