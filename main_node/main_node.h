// odmoe-main as a library: the model's dense part (embeddings, attention and
// its KV cache, norms, gates, LM head) and sampling (MainEngine), the links to
// the workers and the shadow (ClusterLinks), and the Main gRPC service that
// takes completion requests.
//
//   ODMOE_ASSIGN_OR_RETURN(auto main, MainNode::Create(topology, "main"));
//   // serve main->services() (NodeServer), then main->Start(): it dials every
//   // worker and the shadow in the background and reports ready when done.
//   ODMOE_ASSIGN_OR_RETURN(ClusterGenerateResult r, main->Generate(req, nullptr));
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/backend.h"
#include "cluster/node_daemon.h"
#include "main_node/cluster_links.h"
#include "main_node/main_engine.h"
#include "main_node/main_metrics.h"
#include "main_node/request_queue.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "topology/topology.h"

namespace odmoe {

class MainService;
class HttpApi;
class WorkerMetricsPoller;

class MainNode : public NodeDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<MainNode>> Create(const Topology& topology,
                                                          const std::string& node_id);
  ~MainNode() override;

  v1::Role role() const override { return v1::ROLE_MAIN; }
  const std::string& node_id() const override { return id_; }
  uint64_t model_fingerprint() const override { return model_->fingerprint(); }
  std::vector<grpc::Service*> services() override;
  absl::Status Start() override;
  void Shutdown() override;
  void FillStatus(v1::NodeStatus* status) const override;
  /// The Main service's largest request: a Tokenize text (kMaxTokenizeTextBytes,
  /// main_call_limits.h) or a prompt of the whole context, with room for the
  /// message's framing.
  size_t max_receive_message_bytes() const override;

  /// Waits for this request's turn (FIFO). UNAVAILABLE until the cluster is
  /// connected (or while draining); RESOURCE_EXHAUSTED when main.max_queue
  /// requests already wait; CANCELLED when `cancelled` turns true first.
  absl::StatusOr<RequestQueue::Turn> Admit(const std::function<bool()>& cancelled = {});
  /// Runs one request in its turn. `api` labels the metrics ("grpc", "http").
  absl::StatusOr<ClusterGenerateResult> Generate(
      const RequestQueue::Turn& turn, const GenerateRequest& request,
      const GenerationCallback& on_token, const std::function<bool()>& cancelled,
      const std::function<bool()>& should_stop, const std::string& api,
      const Experiment& experiment = {},
      const std::function<void(const RowScore&)>& on_logprobs = {});
  /// Admit + Generate.
  absl::StatusOr<ClusterGenerateResult> Generate(const GenerateRequest& request,
                                                 const GenerationCallback& on_token,
                                                 const std::function<bool()>& cancelled = {},
                                                 const std::string& api = "grpc",
                                                 const Experiment& experiment = {});
  /// Admit + MainEngine::Score: teacher-forced scores of `tokens` in the
  /// request queue like a generation. The request is validated before it
  /// waits (INVALID_ARGUMENT).
  absl::StatusOr<ClusterScoreResult> Score(std::span<const int32_t> tokens,
                                           const ScoreOptions& options,
                                           const std::function<bool()>& cancelled = {});
  /// MainEngine::Score within a turn the caller holds (an echo before its
  /// generation, in the same turn).
  absl::StatusOr<ClusterScoreResult> Score(const RequestQueue::Turn& turn,
                                           std::span<const int32_t> tokens,
                                           const ScoreOptions& options);
  /// Every check of a request that needs no cluster, for both APIs: its
  /// fields, the prompt and the context (PreparePrompt, through the
  /// engine); a prompt that cannot fit the context whatever its
  /// tokenization is refused first (OUT_OF_RANGE), untokenized. Returns the
  /// prompt's token ids: a caller that puts them in request.prompt_ids spares
  /// Generate a second tokenization.
  absl::StatusOr<std::vector<int32_t>> Validate(const GenerateRequest& request) const;
  /// Counts a request that ended before generating (bad input, busy ...).
  void CountRejected(const std::string& api, const absl::Status& status);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelFile& model() const { return *model_; }
  const Topology& topology() const { return topology_; }
  int n_ctx() const { return engine_->n_ctx(); }
  /// The model's id in the HTTP API (the model file's name without .gguf).
  const std::string& model_id() const { return model_id_; }
  /// OK when a request could be served now; else why not (UNAVAILABLE).
  absl::Status CanServe() const;
  /// CanServe, and also UNAVAILABLE while the cluster serves below its
  /// configuration: the topology predicts with the shadow but the shadow is
  /// not connected, so requests run with prediction none (GET /health).
  absl::Status Health() const;
  const MainEngine& engine() const { return *engine_; }
  /// Scaling (the Scale admin call): see MainEngine::SetActiveWorkers.
  absl::Status SetActiveWorkers(int workers) { return engine_->SetActiveWorkers(workers); }
  /// The HTTP API's port (0 without one).
  int http_port() const;
  /// Prometheus text of every counter: the main node's own as they are now,
  /// each worker's from the last probe (WorkerMetricsPoller: every
  /// kWorkerMetricsPeriod on a thread of its own). Never waits for a worker.
  std::string RenderMetrics() const;
  /// Probes every worker now for the next RenderMetrics (tests that need
  /// the workers' counters as they are now).
  void RefreshWorkerMetrics();
  /// How often the workers' series are probed.
  static constexpr absl::Duration kWorkerMetricsPeriod = absl::Seconds(1);

 private:
  MainNode() = default;
  void Record(const ClusterGenerateResult& r);

  std::string id_;
  Topology topology_;
  std::unique_ptr<ModelFile> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ClusterLinks> links_;
  std::unique_ptr<MainEngine> engine_;
  std::unique_ptr<MainService> service_;
  std::unique_ptr<HttpApi> http_;
  std::unique_ptr<RequestQueue> queue_;
  std::unique_ptr<MainMetrics> metrics_;
  std::string model_id_;
  /// OUT_OF_RANGE when the prompt cannot fit the context whatever its
  /// tokenization: more token ids than n_ctx, or more text bytes than n_ctx
  /// tokens of the vocabulary's longest token could spell. Costs no
  /// tokenization (Validate's first step: a guard against work, not a rule
  /// of the request).
  absl::Status CheckPromptSize(const GenerateRequest& request) const;
  size_t max_token_bytes_ = 1;  // the vocabulary's longest token (text or bytes)
  std::unique_ptr<WorkerMetricsPoller> worker_metrics_;  // the workers' series
  std::atomic<bool> cancel_{false};
  std::thread connector_;

  mutable std::mutex stats_mu_;
  uint64_t requests_ = 0, failures_ = 0, tokens_ = 0;
  double last_recall_ = 0, last_decode_tps_ = 0;
};

}  // namespace odmoe
