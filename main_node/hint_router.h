// The main node's hints to the workers (paper §3.1): what each worker should
// prefetch before a layer's tasks come, from whichever predictor serves a
// request (the shadow's predictions on the board, random ones, the gate
// look-ahead from the layer before), and the predictions it puts on the board
// for the assignment (cluster/assignment.h) and recall.
//   - one decode row (IterationPlan::kDecode): SendHint per layer to the
//     layer's group, keyed (request, n): SendRandomHints, Lookahead;
//   - a shared step (kShared): every row's prediction of a layer is on the
//     board (the shadow's, PutRandomPredictions, LookaheadRows); HintStep
//     sends each layer's union once it is complete, to the workers the
//     executor spreads the layer over, keyed by the step.
// It runs on the engine thread only (the executor and the transformer are
// the engine's); the board and the links are thread-safe.
//
//   HintRouter hints(config, topology, links, *executor, *transformer, &schedule);
//   hints.SendRandomHints(request, n);                        // prediction: random, alone
//   std::vector<StepRow> rows = ...;                          // a shared step's decode rows
//   hints.HintStep(plan.key_request, plan.key_token, rows, 0);  // the complete layers now
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "cluster/schedule.h"
#include "engine/transformer.h"
#include "main_node/cluster_executor.h"
#include "main_node/cluster_links.h"
#include "model/model_config.h"
#include "odmoe.pb.h"
#include "topology/topology.h"

namespace odmoe {

/// One decode row of a shared step: whose, which iteration, where in the
/// batch, and its predictor.
struct StepRow {
  uint64_t request = 0;
  int n = 0;
  int64_t row = 0;
  PredictionMode mode = PredictionMode::kNone;
  LookaheadSpec lookahead;
  /// Whether its predictor predicts `layer` (the shadow, random hints: every
  /// MoE layer; the gate look-ahead: a layer predicted from the one before).
  bool Predicts(int layer, const ModelConfig& c) const;
};

class HintRouter {
 public:
  /// Everything is the caller's and outlives the router; `schedule` is read
  /// at each hint (the layer's group).
  HintRouter(const ModelConfig& config, const Topology& topology, ClusterLinks& links,
             ClusterExpertExecutor& executor, Transformer& transformer, const Schedule* schedule)
      : config_(config),
        topology_(topology),
        links_(links),
        executor_(executor),
        transformer_(transformer),
        schedule_(schedule) {}

  /// Random hints (prediction `random`): k experts of every MoE layer drawn
  /// from (request, n).
  std::vector<std::vector<int32_t>> RandomPredictions(uint64_t request, int n) const;
  /// Sends them to the layers' groups (one decode row) ...
  absl::Status SendRandomHints(uint64_t request, int n);
  /// ... or puts them on the board for a shared step's union.
  void PutRandomPredictions(uint64_t request, int n);
  /// Puts a prediction of (token n, layer) on the board (for the layer's
  /// assignment and recall) and sends it to the workers of the layer's group.
  void SendHint(uint64_t request, int n, int layer, std::vector<int32_t> predicted);
  /// Gate look-ahead of one decode row from `layer`'s MoE input `x`: the next
  /// layer's prediction, hinted (FIRM's votes of earlier layers from the
  /// inputs it kept for the same row).
  absl::Status Lookahead(uint64_t request, int n, const LookaheadSpec& spec, int layer, ConstMat x);
  /// A shared step's look-ahead from `layer`'s MoE input rows `x`: each
  /// look-ahead row's prediction of the next layer, on the board (each row
  /// votes with its own layer only: earlier inputs are kept for one row).
  absl::Status LookaheadRows(std::span<const StepRow> rows, int layer, ConstMat x);
  /// A shared step's hints: each layer from `from_layer` on that is not
  /// hinted yet and whose rows' predictions are all in gets the union, sent
  /// with each worker's positions (AddStepHint) and set as the executor's
  /// step prediction. Called at the step's start, after each look-ahead and
  /// before each layer goes out.
  void HintStep(uint64_t key_request, uint32_t key_token, std::span<const StepRow> rows,
                int from_layer);

 private:
  /// The hint of a shared decode step (key request / n, `layer`): the union
  /// of its rows' predictions, for each worker the executor spreads the
  /// layer over, with the positions it computes, added to that worker's
  /// HintBatch in *hints (worker -> message).
  void AddStepHint(uint64_t request, int n, int layer, const std::vector<int32_t>& experts,
                   std::map<int, v1::WorkerRequest>* hints) const;

  const ModelConfig& config_;
  const Topology& topology_;
  ClusterLinks& links_;
  ClusterExpertExecutor& executor_;
  Transformer& transformer_;
  const Schedule* schedule_;
  // Gate look-ahead with FIRM's votes: the MoE inputs kept by Lookahead, one
  // slot per layer mod Transformer::kKeptInputs, with whose token they are.
  struct KeptInput {
    uint64_t request = 0;
    int n = -1;
    int layer = -1;
    ConstMat row{nullptr, 0, 0};
  };
  std::array<KeptInput, Transformer::kKeptInputs> kept_inputs_;
};

}  // namespace odmoe
