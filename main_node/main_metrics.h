// What the main node counts, rendered in the Prometheus text format for
// GET /metrics (docs/operations.md lists every series). Thread-safe.
//
// Every metric family appears once, as "# HELP", "# TYPE" and then all of its
// samples (AppendMetricFamily), so the exposition passes `promtool check
// metrics` (tests/cluster/metrics_test.cpp).
//
//   MainMetrics metrics(n_layer);
//   metrics.RequestDone("http", "ok");
//   metrics.ObserveInterToken(seconds);
//   std::string workers;
//   AppendMetricFamily(&workers, "odmoe_worker_up", "gauge", "Whether the worker answers.",
//                      "odmoe_worker_up{worker=\"w0\"} 1\n");
//   std::string text = metrics.Render(queue_running, queue_waiting, workers);
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "main_node/main_engine.h"

namespace odmoe {

/// Appends one metric family: "# HELP <name> <help>", "# TYPE <name> <type>"
/// (counter | gauge | histogram), then `samples`, its complete sample lines
/// ("<name>{labels} value\n"; may be empty: the family is still described).
void AppendMetricFamily(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help, std::string_view samples);

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

  /// The whole exposition. `extra` is appended as is: whole families (per-
  /// worker series the caller gathers from the workers) written with
  /// AppendMetricFamily, none of them a family Render writes itself.
  std::string Render(int running, int waiting, const std::string& extra) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  uint64_t hits_ = 0, misses_ = 0, reloads_ = 0;
  uint64_t recall_correct_ = 0, recall_slots_ = 0;
  double last_recall_ = 0;
  double alignment_seconds_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0;       // speculative decoding
  uint64_t iterations_ = 0, iteration_tokens_ = 0;
  std::vector<double> stall_per_layer_;
  Histogram ttft_;
  Histogram inter_token_;
};

}  // namespace odmoe
