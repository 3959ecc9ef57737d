// The main node's ExpertExecutor: instead of computing a MoE layer's experts,
// it sends their rows to the workers and combines what comes back, in the
// canonical order of expert_executor.h, so the result is bit-identical to the
// single-process engine.
//
// Decode (token n >= 1, one row): layer l goes to group l mod (N_W / G); the
// k experts the gate chose are placed in k positions by FinalAssignment
// (cluster/assignment.h) against the prediction on the board, and position p
// goes to worker p mod G of the group (one expert per worker when G = k,
// several one after another when G < k, idle workers when G > k). Each task
// names its expert and position; the results are combined by plan entry,
// whoever computed them.
// Verification (token n >= 1, several rows: speculative decoding's decode row
// and drafted rows, keyed by the last row's iteration; or one decode row of
// each of several requests, keyed by the oldest one's iteration): layer l
// goes to its group as in decode; each expert any row chose is one task with
// the rows routed to it, placed by SpreadAssignment against the last row's
// prediction (or the step's own, SetStepPrediction: the union of the rows'),
// over SpreadMembers for a shared step.
// Prefill (token 0, paper §3.3): expert e of every layer goes to worker
// e mod N_W; its rows are sent in mini-batches, all of them before waiting,
// so workers start on the first while the rest travel: `prefill.mini_batch`
// rows each, or (auto) as many messages per expert as
// cluster/prefill_split.h's model of the link and of the workers' costs
// (learned from their results) says is fastest.
//
//   ODMOE_ASSIGN_OR_RETURN(auto ex, ClusterExpertExecutor::Create(model.config(), backend,
//                                                                  topology, *links, 64));
//   ex->SetStep(request, /*token=*/0);              // prefill
//   transformer->Forward(prompt, 0, *ex, &logits, nullptr);
//   ex->SetStep(request, 1);                        // decode iteration 1 ...
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "engine/expert_executor.h"
#include "cluster/prefill_split.h"
#include "cluster/schedule.h"
#include "cluster/trace.h"
#include "main_node/cluster_links.h"
#include "model/model_config.h"
#include "topology/topology.h"

namespace odmoe {

/// What the workers reported for the tasks of one request.
struct ExpertTaskStats {
  uint64_t tasks = 0;
  uint64_t hits = 0, misses = 0, reloads = 0;  // decode tasks
  uint64_t host_computes = 0;  // decode tasks computed on a worker's host (no load)
  uint64_t substitutions = 0;  // decode tasks computed with a substitute (workers.degrade)
  uint64_t low_precision = 0;  // tasks computed from the low-precision copy (mixed_precision)
  double stall_seconds = 0;                    // decode tasks
  double wait_seconds = 0;                     // main waiting for results
  uint64_t worker_failures = 0;                // layers recomputed by another group
  std::vector<double> stall_per_layer;         // decode load stall by layer
};

/// The policies' marks on a task (ExpertTask.degradable, .low_precision).
struct ExpertTaskFlags {
  bool degradable = false;
  bool low_precision = false;
};

class ClusterExpertExecutor : public ExpertExecutor {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterExpertExecutor>> Create(
      const ModelConfig& config, Backend& backend, const Topology& topology,
      ClusterLinks& links, int max_rows);

  void SetStep(uint64_t request, uint32_t token);
  uint32_t token() const { return token_; }
  /// prefill.mini_batch auto: the messages each of `experts` experts with
  /// `rows` rows is sent in (logged when the choice changes).
  int64_t AutoMessagesPerExpert(int experts, int64_t rows);
  /// Makes the step just set a decode step of several requests' rows: each
  /// layer's experts are spread over SpreadMembers(layer) (not only the
  /// layer's group: such a step needs more experts than one group holds),
  /// placed against the layer's step prediction (SetStepPrediction: the
  /// union of the rows' predictions that was hinted; none: unpredicted)
  /// instead of the board's. `before_layer` (may be empty) is called with
  /// each layer before its tasks go out (the caller hints later layers whose
  /// predictions have completed meanwhile). Cleared by SetStep.
  void SetSharedStep(std::function<void(int layer)> before_layer) {
    shared_step_ = true;
    before_layer_ = std::move(before_layer);
  }
  void SetStepPrediction(int layer, std::vector<int32_t> experts) {
    if (step_predictions_.size() <= static_cast<size_t>(layer)) {
      step_predictions_.resize(static_cast<size_t>(layer) + 1);
    }
    step_predictions_[static_cast<size_t>(layer)] = std::move(experts);
  }
  /// Whether the shared step has a prediction of `layer` (it was hinted).
  bool StepPredicted(int layer) const {
    return static_cast<size_t>(layer) < step_predictions_.size() &&
           !step_predictions_[static_cast<size_t>(layer)].empty();
  }
  /// The workers a shared step spreads `layer`'s experts over, in position
  /// order: the live groups' workers, starting with the layer's group.
  std::vector<int> SpreadMembers(int layer) const;
  /// M_l spans (main-node work before layer l's experts, "head" after the
  /// last layer) and expert waits go here while it records (may be null).
  void set_trace(TraceRecorder* trace) { trace_ = trace; }
  /// The schedule to follow (owned by the caller). A worker that fails
  /// (stream broken, or no answer within the timeout) takes its group out of
  /// it, and the layer is recomputed by the next group.
  void SetSchedule(Schedule* schedule, std::mutex* mu) {
    schedule_ = schedule;
    schedule_mu_ = mu;
  }
  /// Called once per decode layer with that layer and its MoE input (its
  /// rows, backend memory) after its tasks went out and before their results
  /// are awaited: a gate look-ahead predicts the next layer from it while the
  /// workers compute. Empty (the default): nothing is called. An error ends
  /// the step.
  using Lookahead = std::function<absl::Status(int layer, ConstMat x)>;
  void set_lookahead(Lookahead lookahead) { lookahead_ = std::move(lookahead); }
  /// The gate's experts of the last step, per layer and batch row (for
  /// recall): actual()[layer][row], ascending ids.
  const std::vector<std::vector<std::vector<int32_t>>>& actual() const { return actual_; }
  ExpertTaskStats TakeStats();
  /// A group that failed stays out of the schedule for a while (1 s, doubling
  /// with each failure up to 60 s), even if its workers still answer
  /// handshakes: a hung worker must not be retried every token. Safe to call
  /// from any thread (health checks).
  bool Quarantined(int group) const;

  absl::Status Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) override;

 private:
  ClusterExpertExecutor(const ModelConfig& config, Backend& backend, const Topology& topology,
                        ClusterLinks& links)
      : config_(config), backend_(backend), topology_(topology), links_(links) {}
  absl::Status Send(int worker, uint32_t layer, uint32_t expert, uint32_t position,
                    const float* rows, int64_t n, uint32_t mini_batch, uint32_t mini_batches,
                    uint64_t* task_id, ExpertTaskFlags flags = {});
  // workers.mixed_precision: plan entry `p` is sub-critical (DyMoE's depth
  // schedule, cluster/precision_schedule.h) for every row routed to it.
  bool SubCritical(int layer, const RoutingPlan& plan, size_t p) const;
  absl::Status Receive(uint64_t task_id, int worker, uint32_t layer, int64_t n,
                       float* rows_out);
  absl::Status Combine(const RoutingPlan& plan, Mat out);
  absl::Status RunExperts(int layer, ConstMat x, const RoutingPlan& plan, Mat out);
  // Runs `attempt` again while it fails for a worker's fault: Failed() takes
  // that worker's group out of the schedule, so the next attempt goes to the
  // layer's next group. Ends with the first success or the first other error.
  absl::Status Retrying(int layer,
                        const std::function<absl::Status(int* failed_worker)>& attempt);
  // The workers of the group that computes `layer` under the schedule.
  std::vector<int> LayerGroupMembers(int layer) const;
  // One attempt each; on failure *failed_worker names the worker at fault
  // (or -1 when the error is not a worker's).
  absl::Status RunDecodeOn(int layer, const RoutingPlan& plan, const std::vector<int>& members,
                           int* failed_worker);
  absl::Status RunPrefillOn(int layer, const RoutingPlan& plan, int* failed_worker);
  absl::Status RunVerifyOn(int layer, const RoutingPlan& plan,
                           const std::vector<int>& members, int* failed_worker);
  // Sends expert `plan.experts[p]`'s rows (gathered from host_x_) as one task.
  absl::Status SendGathered(int worker, uint32_t layer, const RoutingPlan& plan, size_t p,
                            uint32_t position, uint32_t mini_batch, uint32_t mini_batches,
                            int64_t first, int64_t count, uint64_t* task_id);
  // After an UNAVAILABLE from `worker`: drops its group from the schedule.
  // Returns the status to give up with, or OK to try again.
  absl::Status Failed(int worker, int layer, const absl::Status& why);

  const ModelConfig& config_;
  Backend& backend_;
  const Topology& topology_;
  ClusterLinks& links_;
  uint64_t request_ = 0;
  uint32_t token_ = 0;
  TraceRecorder* trace_ = nullptr;
  int64_t mark_us_ = 0;  // end of the last traced span of this step
  int last_layer_ = -1;
  uint64_t next_task_ = 1;
  struct Quarantine {
    std::chrono::steady_clock::time_point until;
    std::chrono::milliseconds backoff{500};
  };
  mutable std::mutex quarantine_mu_;  // Quarantined() is read by health checks
  std::map<int, Quarantine> quarantine_;
  Schedule* schedule_ = nullptr;
  std::mutex* schedule_mu_ = nullptr;  // guards changes for readers elsewhere
  ExpertTaskStats stats_;
  PrefillCostTracker worker_costs_;  // auto mini-batches: the workers' call / row costs
  int64_t last_messages_ = 0;  // auto: the last choice (logged when it changes)
  Lookahead lookahead_;
  ConstMat decode_x_{nullptr, 0, 0};  // the decode layer's MoE input rows (for lookahead_)
  bool lookahead_done_ = false;       // this layer's look-ahead ran (a retry skips it)
  std::vector<std::vector<std::vector<int32_t>>> actual_;
  std::vector<std::vector<int32_t>> step_predictions_;  // SetStepPrediction
  bool shared_step_ = false;
  std::function<void(int layer)> before_layer_;         // SetSharedStep

  int max_rows_ = 0;
  std::vector<float> host_x_;                 // [rows, d]
  std::vector<float> host_gather_;            // one mini-batch
  std::vector<std::vector<float>> host_y_;    // per plan entry: [its rows, d]
  std::vector<float> decoded_;
  std::unique_ptr<BackendBuffer> work_;       // y rows, row ids, scales
  float* ye_ = nullptr;
  int32_t* idx_ = nullptr;
  float* scale_ = nullptr;
  std::vector<float> zeros_;
};

}  // namespace odmoe
