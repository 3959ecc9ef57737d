// The main node's generation: the shared loop (engine/generation.h) on the
// main node's Transformer with a ClusterExpertExecutor, plus what OD-MoE adds
// around each iteration (paper §3.1-3.2):
//   before the prefill   tell the shadow the request (ShadowBegin);
//   before iteration n   send the shadow its alignment: the input token when
//                        token alignment is due, the KV rows written since the
//                        last KV alignment when that is due (chunked), and in
//                        any case the progress marker; in `random` mode send
//                        every group random hints for its layers;
//   during iteration n   in `lookahead` mode, while layer l's experts compute,
//                        predict layer l+1's from layer l's MoE input with
//                        layer l+1's router and send those hints;
//   after the request    ShadowEnd, wait (briefly) for the shadow to finish,
//                        and count recall (Eq. 2-3) from the predictions that
//                        arrived against the gate's choices.
//
// Several requests run at once (up to main.max_running, each in its own KV
// slot; slot 0 is Score's): one engine thread runs iterations. What an
// iteration runs is decided apart from running it (main_node/scheduler.h):
// the Scheduler admits and drops requests at the boundary and returns an
// IterationPlan (whose rows, which drafts, how the workers are asked, under
// which key); this engine carries any plan out the same way:
//   - the shadow's alignment for each decoding request (`batched` when it
//     shares the iteration), then the drafts the scheduler asks for read off
//     the board (PredictionBoard::DraftChain, or WaitDraftChain alone);
//   - the hints: one decode row (kDecode) is the paper's step above (the
//     shadow's own hints, random hints, the gate look-ahead); one request
//     verifying drafts (kVerify) is keyed by its last row; rows of several
//     requests (kShared, drafts included: batched speculative decoding) are
//     one decode step keyed by the oldest request's iteration, each layer's
//     union of the rows' predictions (the shadow's, random ones, or the gate
//     look-ahead's from the layer before) hinted once complete, the experts
//     spread over the live workers starting with the layer's group
//     (ClusterExpertExecutor::SpreadMembers); an iteration with prompt rows
//     (kPrefill) sends every expert to worker e mod N_W, unpredicted;
//   - one forward of the plan's segments, then each request samples from its
//     own rows (Sequence::Consumed, or ConsumedDrafts after drafts), counts its
//     recall on its accepted rows and its speculation.
// Every request's tokens stay those of the single process (the rows are
// independent; tests/cluster/concurrency_test.cpp, speculative_test.cpp).
//
//   ODMOE_ASSIGN_OR_RETURN(auto engine, MainEngine::Create(topology, *model, *tok, *be, *links));
//   ODMOE_ASSIGN_OR_RETURN(ClusterGenerateResult r, engine->Generate(req, on_token));
//   r.result.output_ids; r.recall.overall; r.experts.hits ...
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "cluster/recall.h"
#include "engine/generation.h"
#include "engine/scoring.h"
#include "main_node/cluster_executor.h"
#include "main_node/cluster_links.h"
#include "main_node/hint_router.h"
#include "main_node/scheduler.h"
#include "main_node/shadow_follower.h"
#include "model/model_file.h"
#include "topology/topology.h"

namespace odmoe {

/// Benchmarks: one request's own prediction setup instead of the topology's
/// (the ablations of paper §4.2 on one running cluster).
struct Experiment {
  std::optional<PredictionMode> prediction;
  std::optional<int> token_period, kv_period;  // both or neither; 0 = never
  std::optional<int> draft_tokens;             // speculative decoding; 0 = off
  std::optional<int64_t> draft_wait_us;        // see ShadowSpec::draft_wait_us
  std::optional<LookaheadSpec> lookahead;      // prediction: lookahead's variant
};

/// Speculative decoding's count for one request (all zero when it ran
/// without drafts).
struct SpeculationStats {
  int draft_tokens = 0;     // drafts asked for per iteration
  uint64_t drafted = 0;     // drafted tokens verified
  uint64_t accepted = 0;    // of them, taken
  uint64_t iterations = 0;  // decode iterations (verifying or not, alone or shared)
  uint64_t tokens = 0;      // tokens those iterations produced
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  double tokens_per_iteration() const {
    return iterations ? static_cast<double>(tokens) / iterations : 0.0;
  }
};

struct ClusterGenerateResult {
  GenerateResult result;
  uint64_t request_id = 0;
  PredictionMode prediction = PredictionMode::kNone;  // what was actually used
  RecallSummary recall;
  ExpertTaskStats experts;
  double alignment_seconds = 0;         // reading KV rows and sending alignments
  int token_period = 0, kv_period = 0;  // the alignment used (shadow prediction)
  LinkBytes bytes;                      // through the main node's links
  uint64_t schedule_version = 0;        // the schedule the request ended with
  int live_groups = 0;
  SpeculationStats speculation;
};

/// Whether a request's recall is "the last recall" (metrics, status): it ran
/// with a predictor and decoded. A predictor that stayed silent gives recall
/// 0, not the previous request's value.
inline bool CountsForRecall(const ClusterGenerateResult& r) {
  return r.recall.slots > 0 ||
         (r.prediction != PredictionMode::kNone && r.recall.predictions_missing > 0);
}

/// A Score request on the cluster.
struct ClusterScoreResult {
  ScoreResult score;
  uint64_t request_id = 0;
  ExpertTaskStats experts;
  LinkBytes bytes;
};

class MainEngine {
 public:
  static absl::StatusOr<std::unique_ptr<MainEngine>> Create(const Topology& topology,
                                                            const ModelFile& model,
                                                            const Tokenizer& tokenizer,
                                                            Backend& backend, ClusterLinks& links);

  ~MainEngine();
  /// Ends the engine thread: requests still running or waiting end with
  /// UNAVAILABLE ("shutting down"), later ones are refused. Idempotent.
  void Stop();

  /// Runs the request on the engine thread (with the others running) and
  /// returns when it ends; `on_token`, `should_stop`, `on_logprobs` and
  /// `cancelled` are called on that thread. `cancelled` (optional) is polled
  /// before every iteration; when it returns true the request ends with
  /// CANCELLED.
  absl::StatusOr<ClusterGenerateResult> Generate(
      const GenerateRequest& request, const GenerationCallback& on_token,
      const std::function<bool()>& cancelled = {}, const std::function<bool()>& should_stop = {},
      const Experiment& experiment = {},
      const std::function<void(const RowScore&)>& on_logprobs = {});
  /// Teacher-forced scores of `tokens` (engine/scoring.h), run as one
  /// prefill (token 0 of a new request id) on the workers: the bits of
  /// ReferenceEngine::Score. The shadow takes no part (a prefill uses no
  /// prediction). INVALID_ARGUMENT when the request does not fit
  /// (ValidateScore); UNAVAILABLE without a complete worker group.
  absl::StatusOr<ClusterScoreResult> Score(std::span<const int32_t> tokens,
                                           const ScoreOptions& options);
  /// ValidateScoreRequest against this node's vocabulary and context.
  absl::Status ValidateScore(std::span<const int32_t> tokens, const ScoreOptions& options) const;
  /// The checks Generate starts with (sampling, prompt, context); the prompt ids.
  absl::StatusOr<std::vector<int32_t>> Validate(const GenerateRequest& request) const;

  /// TraceSpans (M_l, alignment) go here while it records (may be null).
  void set_trace(TraceRecorder* trace);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  int n_ctx() const { return transformer_->n_ctx(); }
  /// The schedule as of the last token boundary (groups that take layers).
  Schedule schedule() const;
  /// Whether some group (among the active ones) has every worker connected
  /// and has not failed lately (a group whose worker timed out is
  /// quarantined, as a disconnected one is: it does not count as complete).
  bool HasCompleteGroup() const;
  /// Scaling: only the first `workers` workers (whole groups) take layers,
  /// from the next token boundary on. INVALID_ARGUMENT unless `workers` is a
  /// multiple of the group size between one group and the topology's count.
  absl::Status SetActiveWorkers(int workers);
  int active_workers() const { return active_groups_.load() * topology_.group_size; }
  /// Requests in the engine now (running and waiting for a slot).
  int in_engine() const { return in_engine_.load(); }
  /// Iterations that carried rows of several requests, and their rows.
  uint64_t shared_iterations() const { return shared_iterations_.load(); }
  uint64_t shared_rows() const { return shared_rows_.load(); }
  /// Drafted tokens verified in iterations shared by several requests.
  uint64_t shared_drafts() const { return shared_drafts_.load(); }
  /// Rows run again to bring a recurrent model's state to the accepted
  /// drafts (Replay).
  uint64_t replayed_rows() const { return replayed_rows_.load(); }

 private:
  struct Job;  // one request in the engine (main_engine.cpp)
  MainEngine(const Topology& topology, const ModelFile& model, const Tokenizer& tokenizer,
             ClusterLinks& links)
      : topology_(topology), model_(model), tokenizer_(tokenizer), links_(links) {}
  uint64_t NextRequestId();
  /// The shadow's alignment for `job`'s decode iteration n (when it follows
  /// the job): token / KV rows as due, `batched` when the iteration is shared.
  /// Returns whether the token was sent. A broken link ends the following,
  /// not the request.
  bool AlignShadow(Job& job, int n, int32_t token, int pos, bool batched);
  // At a token boundary: groups whose workers are all connected take layers
  // (a group that failed comes back once its workers have rejoined).
  void RefreshSchedule();
  // The engine thread and one iteration of it (generate_mu_ held).
  void Loop();
  void Iterate();
  // The running requests' states, their alignment and drafts, the plan, run.
  absl::Status Step();
  absl::Status RunPlan(const IterationPlan& plan);
  /// Runs `tokens` again at `segments` (each from its slot's recurrent-state
  /// checkpoint) after a verification that accepted fewer drafts than it ran.
  absl::Status Replay(const IterationPlan& plan, std::span<const int32_t> tokens,
                      std::span<const Transformer::Segment> segments);
  // Its first step: a request id, the prediction board, ShadowBegin.
  void BeginJob(Job& job, bool alone);
  // Records the gate's experts of `rows` batch rows from `row0` of the
  // executor's last step as the job's iterations n, n + 1, ...
  void RecordActual(Job& job, int n, int64_t row0, int rows);
  // Ends a running job (its slot is free from the next boundary).
  void Finish(Job& job, absl::Status status);
  // Ends a job that never ran.
  void Resolve(uint64_t handle, absl::Status status);

  const Topology& topology_;
  const ModelFile& model_;
  const Tokenizer& tokenizer_;
  ClusterLinks& links_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<ClusterExpertExecutor> executor_;
  std::unique_ptr<HintRouter> hints_;
  std::unique_ptr<ShadowFollower> shadow_;
  std::mutex generate_mu_;
  mutable std::mutex schedule_mu_;  // schedule_ is read by status calls
  uint64_t last_request_ = 0;
  // The engine thread: requests handed over by Generate (jobs_mu_), then the
  // thread's own lists.
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  std::deque<std::shared_ptr<Job>> submitted_;
  bool stop_ = false;
  // The engine thread's: every job it holds by handle (waiting and running),
  // the running ones in arrival order, and what decides between them.
  uint64_t next_handle_ = 0;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;
  std::vector<std::shared_ptr<Job>> running_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<int> in_engine_{0};
  std::atomic<uint64_t> shared_iterations_{0}, shared_rows_{0}, shared_drafts_{0};
  std::atomic<uint64_t> replayed_rows_{0};
  std::thread loop_;
  Schedule schedule_;
  std::atomic<int> active_groups_{0};
  TraceRecorder* trace_ = nullptr;
};

}  // namespace odmoe
