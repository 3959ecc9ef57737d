// An in-process cluster for tests: real WorkerNode / ShadowNode / MainNode
// objects behind real gRPC servers on ephemeral loopback ports, started in
// the order the daemons would be (workers, shadow, main) and torn down in
// reverse.
//
//   ClusterConfig cfg;  cfg.workers = 4;  cfg.prediction = PredictionMode::kNone;
//   auto cluster = TestCluster::Start(cfg).value();
//   auto r = cluster->main().Generate(request, nullptr).value();
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/node_server.h"
#include "cluster/peer_auth.h"
#include "engine/reference_engine.h"
#include "main_node/main_node.h"
#include "shadow_node/shadow_node.h"
#include "test_paths.h"
#include "topology/topology.h"
#include "worker_node/worker_node.h"

namespace odmoe::test {

struct ClusterConfig {
  int workers = 8;
  int group_size = 0;  // G; 0: the model's top-k
  PredictionMode prediction = PredictionMode::kShadow;
  bool shadow = false;        // a shadow node even when prediction is not kShadow
  int draft_tokens = 0;       // shadow.draft_tokens (speculative decoding)
  int64_t draft_wait_us = 0;  // shadow.draft_wait
  WorkerMode worker_mode = WorkerMode::kOnDemand;
  DType quantization = DType::kQ8_0;
  int token_period = 1;
  int kv_period = 1;
  int mini_batch = 16;
  int batch = 64;
  int context = 512;  // main.context (the tiny model's training context)
  WireDType wire = WireDType::kF32;
  std::string model = SourcePath("models/tiny-mixtral-f16.gguf");
  bool http = false;  // serve the HTTP API on a free port
  std::string api_key;
  uint64_t max_body_bytes = 0;  // main.max_body_bytes; 0 = the default (8 MiB)
  HttpLimits http_limits;       // main.http_limits (connections, deadlines, buffers)
  // Where the main node's gRPC server listens ("0.0.0.0": every interface, for
  // callers from a non-loopback address); main_address() stays loopback.
  std::string main_listen_host = "127.0.0.1";
  int max_queue = 16;
  int max_running = 1;            // main.max_running (the product's default is 4)
  int worker_timeout_ms = 2000;   // tests notice a hung worker quickly
  uint64_t load_bandwidth = 0;    // emulated cap on expert loads (bytes/s)
  bool host_compute = false;      // workers.host_compute (DAOP's compute on a miss)
  int host_compute_slowdown = 1;  // workers.host_compute_slowdown (emulation)
  bool sub_expert = false;        // workers.sub_expert (FIRM's sub-expert streaming)
  bool degrade = false;           // workers.degrade (DAOP's degradation, LOSSY)
  std::optional<MixedPrecisionSpec> mixed_precision;  // workers.mixed_precision (DyMoE, LOSSY)
  int cache_experts = 8;                              // lru_cache workers
  int64_t wire_delay_us = 0;      // emulated one-way delay on every received message
  std::string backend = "cpu:1";  // every node's backend
  uint64_t memory_budget = 0;     // every worker's; 0 = auto (WorkerBudgetForSlots)
};

/// The memory budget that gives an on-demand worker of `config`'s topology
/// exactly `slots` expert slots.
uint64_t WorkerBudgetForSlots(const ClusterConfig& config, int slots);

/// A request for `max_tokens` tokens that ignores EOS (so its length is
/// fixed), greedy unless `temperature` > 0 (then seeded with `seed`).
GenerateRequest TestRequest(const std::string& prompt, int max_tokens, float temperature = 0,
                            uint64_t seed = 0);

/// The single-process engine of the shipped tiny model (made once per test
/// process): what every cluster run of that model must reproduce.
ReferenceEngine& TinyReference();

/// Starts a cluster of `config`, generates `request` on it, and stops it.
absl::StatusOr<ClusterGenerateResult> GenerateOnNewCluster(const ClusterConfig& config,
                                                           const GenerateRequest& request);

/// The two requests the policy tests run through a cluster: one greedy, one
/// sampled (seeded).
std::vector<GenerateRequest> PolicyRequests();

/// Runs PolicyRequests() on one cluster of `config`: each must succeed with
/// the single process's tokens; `check` (may be empty) sees each result.
void ExpectPolicyKeepsTokens(const ClusterConfig& config,
                             const std::function<void(const ClusterGenerateResult&)>& check);

/// Runs `requests` on `main` at once, one client thread each, and returns
/// their results in the same order.
std::vector<absl::StatusOr<ClusterGenerateResult>> GenerateConcurrently(
    MainNode& main, const std::vector<GenerateRequest>& requests);

/// Runs `generate` until one run's shadow predicted something
/// (recall.slots > 0), at most three times: on a loaded machine under a
/// sanitizer a short run can end before the shadow's first prediction
/// arrives. `check` sees every successful run (its tokens, say); the last run
/// is returned, an error at once.
///
///   auto r = GenerateUntilPredicted([&] { return main.Generate(req, nullptr); });
absl::StatusOr<ClusterGenerateResult> GenerateUntilPredicted(
    const std::function<absl::StatusOr<ClusterGenerateResult>()>& generate,
    const std::function<void(const ClusterGenerateResult&)>& check = {});

/// The value of one series ("name{labels}", as written) in `main`'s
/// metrics; 0 when it is not there.
///   MetricValue(main, "odmoe_requests_total{api=\"http\",outcome=\"cancelled\"}")
double MetricValue(const MainNode& main, const std::string& series);

/// The usual cluster of the HTTP tests: two workers, no prediction, the
/// HTTP API on a free port.
ClusterConfig HttpClusterConfig();

/// The first `n` lines of tests/data/heldout.txt that have at least 24
/// characters, cut to 80: prompts the model never trained on.
std::vector<std::string> HeldOutPrompts(int n);

/// The topology a ClusterConfig describes, with port 0 everywhere and
/// TestSecretFile() as its cluster secret.
Topology MakeTopology(const ClusterConfig& config);

/// A cluster secret file (mode 0600) made once per test process, removed
/// at exit: every topology of the tests' in-process clusters uses it.
const std::string& TestSecretFile();
/// Credentials of `topology`'s secret for a caller of `role` named `id`
/// (an operator for Main.Scale / Node.Trace, a main node ...).
std::shared_ptr<const PeerAuth> TestAuth(const Topology& topology, PeerRole role,
                                         const std::string& id);

class TestCluster {
 public:
  static absl::StatusOr<std::unique_ptr<TestCluster>> Start(const ClusterConfig& config);
  ~TestCluster();

  MainNode& main() { return *main_; }
  ShadowNode* shadow() { return shadow_.get(); }
  WorkerNode& worker(int i) { return *workers_[static_cast<size_t>(i)]; }
  int n_workers() const { return static_cast<int>(workers_.size()); }
  const Topology& topology() const { return topology_; }
  std::string main_address() const;

  /// Stops worker i abruptly (its streams break, as when the process dies).
  void KillWorker(int i);
  /// Starts worker i again at the same address.
  absl::Status RestartWorker(int i);
  void KillShadow();
  absl::Status RestartShadow();
  /// Stops the main node and starts a new one at the same address (same id
  /// and secret), waiting until it is ready: it takes the streams back.
  absl::Status RestartMain();

 private:
  TestCluster() = default;
  Topology topology_;
  std::vector<std::unique_ptr<WorkerNode>> workers_;
  std::vector<std::unique_ptr<NodeServer>> worker_servers_;
  std::unique_ptr<ShadowNode> shadow_;
  std::unique_ptr<NodeServer> shadow_server_;
  std::unique_ptr<MainNode> main_;
  std::unique_ptr<NodeServer> main_server_;
};

}  // namespace odmoe::test
