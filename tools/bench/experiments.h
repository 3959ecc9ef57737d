// The experiments of odmoe-bench (the paper's §4 on our own cluster), each a
// function from a BenchContext to a JSON result; odmoe_bench.cpp parses the
// command line, runs the ones asked for and writes the reports.
//
//   deployments  OD-MoE, resident ("fully cached"), none, random, an LRU
//                expert cache, and the single-process reference engine,
//                side by side on the Table 2 configurations;
//   recall       recall per output-token index for F16 / Q8_0 / Q4_0 shadows
//                without alignment, token only, token + KV (Fig. 3);
//   ablation     the six cases of §4.2 (Fig. 8);
//   periods      token x KV alignment periods (Fig. 9);
//   timing       a timing diagram of a few decode steps (Fig. 2) and Eq. 1;
//   concurrency  1..16 clients at once (continuous batching);
//   speculative  the shadow as drafter: acceptance, tokens per iteration and
//                decode speed against OD-MoE without drafts and resident;
//   prefill      time to first token against prefill.mini_batch.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster_process.h"
#include "bench/request_runner.h"
#include "bench/workload.h"
#include "engine/reference_engine.h"
#include "nlohmann/json.hpp"
#include "topology/topology.h"

namespace odmoe::bench {

struct BenchOptions {
  std::string topology_path = "deploy/testbed-10.yaml";
  bool attach = false;  // use the running cluster of the topology; start nothing
  std::string out_dir = "bench-out";
  std::string bin_dir;  // where odmoe-cluster and the daemons are
  std::string heldout = "tests/data/heldout.txt";
  bool quick = false;
  std::vector<std::string> experiments;  // empty = all
  std::vector<BenchConfig> configs;      // deployments experiment
  std::vector<std::string> deployments;  // deployments experiment: subset (empty = all)
  int prompts = 3;                       // per configuration
  int repeats = 5;                       // ablation / periods: prompts per cell
  std::vector<int> periods = {1, 2, 4, 8, 16};
  int recall_tokens = 256;
  int ablation_tokens = 256;
  double load_ratio = 64;       // expert load time / expert compute time (emulated link)
  uint64_t load_bandwidth = 0;  // bytes/s; overrides load_ratio when set
  int lru_experts = 16;
  std::vector<double> sweep_ratios = {4, 16, 64, 256};  // load-sweep experiment
  int port_base = 0;  // != 0: renumber every node's port from here (and drop HTTP)
  int start_timeout = 120;
  std::string network;  // how the links are emulated, for the report ("" = loopback)
  int64_t link_delay_us = -1;  // >= 0: wire.emulated_delay for every deployment
  uint64_t link_bandwidth = 0;
  double mixed_floor = 0.0;  // odmoe-mixed: workers.mixed_precision.floor
  int host_slowdown = 8;  // odmoe-host / none-host: workers.host_compute_slowdown  // > 0: wire.link_bandwidth for every deployment (auto mini-batches)
  std::vector<int> clients = {1, 2, 4, 8, 16};  // concurrency experiment: clients at once
  int concurrency_tokens = 64;                  // output tokens per client's request
  int concurrency_prompt_tokens = 16;
  int concurrency_drafts = 4;  // each level again with this many drafts per request (0: not)
  std::vector<int> drafts = {2, 4, 8};  // speculative experiment: draft_tokens levels
  int speculative_tokens = 64;          // output tokens per request
  int64_t draft_wait_us = 20000;        // the waiting variant's shadow.draft_wait
  std::vector<int> prefill_lengths = {64, 264};    // prefill experiment: prompt tokens
  std::vector<int> mini_batches = {4, 16, 64};     // and prefill.mini_batch sizes (+ none)
};

/// What every experiment shares: the base topology, the reference engine,
/// prompts, the emulated link, and the clusters started so far (kept running
/// between experiments that use the same deployment).
class BenchContext {
 public:
  static absl::StatusOr<std::unique_ptr<BenchContext>> Create(const BenchOptions& options);
  ~BenchContext();

  const BenchOptions& options() const { return options_; }
  const Topology& base() const { return base_; }
  const ModelConfig& model_config() const { return reference_->model().config(); }
  uint64_t load_bandwidth() const { return load_bandwidth_; }
  /// The emulation settings, for every report.
  nlohmann::json EmulationJson() const;

  /// `count` held-out prompts of `n_tokens` tokens (cached).
  absl::StatusOr<std::vector<std::vector<int32_t>>> Prompts(int n_tokens, int count);
  /// The reference engine's greedy tokens and decode speed (cached).
  struct Reference {
    std::vector<int32_t> output_ids;
    double decode_tps = 0, ttft_s = 0, output_tps = 0;
    double judged_ppl = 0;  // JudgedPerplexity of output_ids
  };
  absl::StatusOr<Reference> ReferenceRun(const std::vector<int32_t>& prompt, int max_tokens);
  /// The lossless model's perplexity of `output` after `prompt` (the single
  /// process scores it): how a lossy policy's text reads to the exact model.
  absl::StatusOr<double> JudgedPerplexity(const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& output);

  /// Deployment topologies (see experiments.cpp): "odmoe", "resident", "lru",
  /// "shadow-f16", "shadow-q8_0", "shadow-q6_k", "shadow-q5_k", "shadow-q4_k", "shadow-q4_0".
  /// Workers' loads are capped at `load_bandwidth` (bytes/s, 0 = no cap).
  absl::StatusOr<Topology> DeploymentTopology(const std::string& name,
                                              uint64_t load_bandwidth) const;
  /// The running cluster of a deployment with the benchmark's emulated link
  /// (or another cap): started now unless it runs; other deployments are
  /// stopped first (one cluster at a time).
  absl::StatusOr<ClusterProcess*> Cluster(const std::string& name);
  absl::StatusOr<ClusterProcess*> Cluster(const std::string& name, uint64_t load_bandwidth);
  /// The cap that makes one expert load take `ratio` x the calibrated compute.
  uint64_t BandwidthForRatio(double ratio) const;
  double expert_compute_us() const { return compute_us_; }
  /// Per-node peak memory of the running cluster.
  absl::StatusOr<nlohmann::json> MemoryJson(const std::string& name);
  void StopClusters();

  /// Runs one request and checks its tokens against the reference engine.
  /// While an experiment runs, a status line shows its requests so far and
  /// its time (redrawn on a terminal, a line every 5 s otherwise).
  absl::StatusOr<RequestMetrics> Run(ClusterProcess& cluster, const RequestSpec& spec,
                                     bool* exact);
  /// Progress of the run: "[2/6] recall: started", then "recall: done in
  /// 34 s (48 requests)" (or "failed after ...").
  void BeginExperiment(const std::string& name, int index, int count);
  void EndExperiment(bool ok);

 private:
  BenchContext() = default;
  BenchOptions options_;
  Topology base_;
  std::unique_ptr<ReferenceEngine> reference_;
  uint64_t load_bandwidth_ = 0;
  double compute_us_ = 0;
  uint64_t expert_bytes_ = 0;
  std::map<std::pair<int, int>, std::vector<std::vector<int32_t>>> prompts_;
  std::map<std::pair<std::vector<int32_t>, int>, Reference> references_;
  std::string running_name_;
  std::string experiment_;  // the one running, with its "[i/n]" prefix
  std::chrono::steady_clock::time_point experiment_start_;
  int experiment_requests_ = 0;
  std::unique_ptr<ClusterProcess> running_;
};

using Experiment = std::function<absl::StatusOr<nlohmann::json>(BenchContext&)>;

/// name -> experiment, in the order they run.
std::vector<std::pair<std::string, Experiment>> AllExperiments();

/// Mean and sample standard deviation.
struct MeanStd {
  double mean = 0, std = 0;
  int n = 0;
};
MeanStd Summarize(const std::vector<double>& values);

}  // namespace odmoe::bench
