#include "main_node/main_engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "cluster/wire.h"
#include "engine/batch_generator.h"
#include "engine/sequence.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {}  // namespace

absl::StatusOr<std::unique_ptr<MainEngine>> MainEngine::Create(const Topology& topology,
                                                               const ModelFile& model,
                                                               const Tokenizer& tokenizer,
                                                               Backend& backend,
                                                               ClusterLinks& links) {
  std::unique_ptr<MainEngine> e(new MainEngine(topology, model, tokenizer, links));
  Transformer::Options topt;
  topt.n_ctx = topology.main.context;
  topt.n_batch = topology.main.batch;
  topt.n_seq = topology.main.max_running + 1;  // slot 0: Score
  ODMOE_ASSIGN_OR_RETURN(e->transformer_, Transformer::Create(model, backend, topt));
  ODMOE_ASSIGN_OR_RETURN(e->executor_,
                         ClusterExpertExecutor::Create(model.config(), backend, topology, links,
                                                       e->transformer_->n_batch()));
  e->schedule_ = Schedule::AllGroups(topology);
  e->shadow_ =
      std::make_unique<ShadowFollower>(model.config(), links, *e->transformer_, &e->schedule_);
  e->hints_ = std::make_unique<HintRouter>(model.config(), topology, links, *e->executor_,
                                           *e->transformer_, &e->schedule_);
  e->active_groups_ = topology.n_groups();
  e->executor_->SetSchedule(&e->schedule_, &e->schedule_mu_);
  // Slot 0 is Score's (ScoreTokens runs in slot 0); requests take 1, 2, ...
  e->scheduler_ =
      std::make_unique<Scheduler>(SchedulerBudgets{.slots = topt.n_seq - 1,
                                                   .first_slot = 1,
                                                   .max_rows = e->transformer_->n_batch(),
                                                   .prefill_chunk = e->transformer_->n_batch(),
                                                   .max_task_rows = topology.max_task_rows(),
                                                   .n_ctx = e->transformer_->n_ctx()});
  return e;
}

Schedule MainEngine::schedule() const {
  std::lock_guard<std::mutex> lock(schedule_mu_);
  return schedule_;
}

absl::Status MainEngine::SetActiveWorkers(int workers) {
  const int g = topology_.group_size;
  if (workers < g || workers > topology_.n_workers() || workers % g != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot scale to %d workers: expected a multiple of the group size %d from %d to %d "
        "(the topology's workers)",
        workers, g, g, topology_.n_workers()));
  }
  active_groups_ = workers / g;
  ODMOE_LOG_INFO("scaling to {} workers ({} groups) at the next token boundary", workers,
                 workers / g);
  return absl::OkStatus();
}

bool MainEngine::HasCompleteGroup() const {
  for (int g = 0; g < active_groups_.load(); ++g) {
    bool up = !executor_->Quarantined(g);
    for (int w : topology_.GroupMembers(g)) up = up && links_.worker_connected(w);
    if (up) return true;
  }
  return false;
}

void MainEngine::RefreshSchedule() {
  std::lock_guard<std::mutex> lock(schedule_mu_);
  for (int g = 0; g < topology_.n_groups(); ++g) {
    bool up = g < active_groups_.load() && !executor_->Quarantined(g);
    for (int w : topology_.GroupMembers(g)) up = up && links_.worker_connected(w);
    if (up && schedule_.Add(g)) {
      ODMOE_LOG_INFO("group {} takes layers again (schedule version {}, {} groups)", g,
                     schedule_.version, schedule_.groups.size());
    } else if (!up && schedule_.Remove(g)) {
      ODMOE_LOG_WARN("group {} leaves the schedule ({}; version {}, {} groups)", g,
                     g >= active_groups_.load()  ? "scaled down"
                     : executor_->Quarantined(g) ? "it failed recently"
                                                 : "a worker is down",
                     schedule_.version, schedule_.groups.size());
    }
  }
}

uint64_t MainEngine::NextRequestId() {
  // Increasing across restarts of the main node too: workers and the shadow
  // treat smaller request ids as finished.
  const uint64_t now_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  last_request_ = std::max(last_request_ + 1, now_ms);
  return last_request_;
}

void MainEngine::set_trace(TraceRecorder* trace) {
  trace_ = trace;
  executor_->set_trace(trace);
}

absl::StatusOr<std::vector<int32_t>> MainEngine::Validate(const GenerateRequest& request) const {
  return PreparePrompt(request, tokenizer_, n_ctx());
}

struct MainEngine::Job {
  GenerateRequest request;
  PredictionMode mode = PredictionMode::kNone;
  ShadowFollow follow;        // the shadow's periods and drafts, and its alignment so far
  absl::Duration draft_wait;  // longest wait for them per iteration
  LookaheadSpec lookahead;    // prediction: lookahead's variant
  bool waits_pay = true;      // the last wait for drafts found some
  std::function<bool()> cancelled;
  std::unique_ptr<Sequence> seq;
  std::promise<absl::StatusOr<ClusterGenerateResult>> done;

  uint64_t handle = 0;  // the engine thread's name for it (the scheduler's)
  int slot = -1;
  uint64_t req = 0;
  bool started = false;  // BeginJob ran
  int forwards = 0;      // decode tokens run (the last iteration's n, plus its accepted drafts)
  RecallCounter recall;
  LinkBytes bytes_before;
  ClusterGenerateResult out;
};

namespace {

void AddStats(ExpertTaskStats& into, const ExpertTaskStats& add) {
  into.tasks += add.tasks;
  into.hits += add.hits;
  into.misses += add.misses;
  into.host_computes += add.host_computes;
  into.substitutions += add.substitutions;
  into.low_precision += add.low_precision;
  into.reloads += add.reloads;
  into.stall_seconds += add.stall_seconds;
  into.wait_seconds += add.wait_seconds;
  into.worker_failures += add.worker_failures;
  if (into.stall_per_layer.size() < add.stall_per_layer.size()) {
    into.stall_per_layer.resize(add.stall_per_layer.size(), 0.0);
  }
  for (size_t l = 0; l < add.stall_per_layer.size(); ++l) {
    into.stall_per_layer[l] += add.stall_per_layer[l];
  }
}

}  // namespace

MainEngine::~MainEngine() { Stop(); }

void MainEngine::Stop() {
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    stop_ = true;
  }
  jobs_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

absl::StatusOr<ClusterGenerateResult> MainEngine::Generate(
    const GenerateRequest& request, const GenerationCallback& on_token,
    const std::function<bool()>& cancelled, const std::function<bool()>& should_stop,
    const Experiment& experiment, const std::function<void(const RowScore&)>& on_logprobs) {
  const PredictionMode mode = experiment.prediction.value_or(topology_.prediction);
  if (mode == PredictionMode::kShadow && !topology_.shadow) {
    return absl::InvalidArgumentError(
        "experiment: prediction 'shadow' needs a shadow node, and this cluster has none");
  }
  if (absl::Status s = CheckWorkerModeHints(topology_.worker_mode, PredictionModeName(mode));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("experiment: ", s.message()));
  }
  if (experiment.token_period.has_value() != experiment.kv_period.has_value() ||
      experiment.token_period.value_or(0) < 0 || experiment.kv_period.value_or(0) < 0 ||
      experiment.token_period.value_or(0) > (1 << 20) ||
      experiment.kv_period.value_or(0) > (1 << 20)) {
    return absl::InvalidArgumentError(
        "experiment: alignment needs both token_period and kv_period in [0, 1048576]");
  }
  if (experiment.draft_tokens.has_value()) {
    const int d = *experiment.draft_tokens;
    if (d < 0 || d > kMaxDraftTokens || d + 1 > transformer_->n_batch() ||
        d + 1 > topology_.max_task_rows()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "experiment: draft_tokens must be in [0, %d], and its verification's %d rows within "
          "main.batch (%d) and the workers' largest task (%d rows: prefill.mini_batch, "
          "shadow.draft_tokens + 1); got %d",
          kMaxDraftTokens, d + 1, transformer_->n_batch(), topology_.max_task_rows(), d));
    }
    if (experiment.draft_wait_us.value_or(0) < 0 ||
        experiment.draft_wait_us.value_or(0) > 10'000'000) {
      return absl::InvalidArgumentError("experiment: draft_wait must be in [0, 10s]");
    }
    if (d > 0 && !topology_.shadow) {
      return absl::InvalidArgumentError(
          "experiment: speculative decoding drafts with the shadow node, and this cluster has "
          "none");
    }
  }
  if (experiment.lookahead.has_value()) {
    const LookaheadSpec& l = *experiment.lookahead;
    if (l.layers < 1 || l.layers > kMaxLookaheadLayers || l.candidates < 0 || l.candidates > 4096 ||
        l.from_layer < 0 || l.from_layer > 65536) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "experiment: lookahead layers must be in [1, %d], candidates in [0, 4096], from_layer "
          "in [0, 65536]",
          kMaxLookaheadLayers));
    }
  }
  ODMOE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_ids,
                         PreparePrompt(request, tokenizer_, n_ctx()));
  auto job = std::make_shared<Job>();
  job->request = request;
  job->mode = mode;
  job->follow.token_period =
      experiment.token_period.value_or(topology_.shadow ? topology_.shadow->token_period : 0);
  job->follow.kv_period =
      experiment.kv_period.value_or(topology_.shadow ? topology_.shadow->kv_period : 0);
  job->follow.draft =
      experiment.draft_tokens.value_or(topology_.shadow ? topology_.shadow->draft_tokens : 0);
  job->draft_wait = absl::Microseconds(
      experiment.draft_wait_us.value_or(topology_.shadow ? topology_.shadow->draft_wait_us : 0));
  job->lookahead = experiment.lookahead.value_or(topology_.lookahead);
  job->cancelled = cancelled;
  job->seq = std::make_unique<Sequence>(tokenizer_, request, std::move(prompt_ids), on_token,
                                        should_stop, on_logprobs);
  const ModelConfig& c = model_.config();
  job->recall = RecallCounter(c.n_layer, c.n_expert_used, c.n_dense_leading);
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) job->recall.SkipLayer(l);  // interleaved dense layers (Llama 4)
  }
  std::future<absl::StatusOr<ClusterGenerateResult>> result = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    if (stop_) return absl::UnavailableError("the main node is shutting down");
    submitted_.push_back(std::move(job));
    ++in_engine_;
    if (!loop_.joinable()) loop_ = std::thread([this] { Loop(); });
  }
  jobs_cv_.notify_all();
  return result.get();
}

void MainEngine::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(jobs_mu_);
      jobs_cv_.wait(lock, [&] { return stop_ || !submitted_.empty() || !jobs_.empty(); });
      while (!submitted_.empty()) {
        const uint64_t handle = ++next_handle_;
        submitted_.front()->handle = handle;
        jobs_[handle] = std::move(submitted_.front());
        scheduler_->Submit(handle);
        submitted_.pop_front();
      }
      if (stop_) break;
    }
    std::lock_guard<std::mutex> lock(generate_mu_);
    Iterate();
  }
  std::lock_guard<std::mutex> lock(generate_mu_);
  const absl::Status down = absl::UnavailableError("the main node is shutting down");
  while (!running_.empty()) Finish(*running_.front(), down);
  for (uint64_t handle : scheduler_->Drain()) Resolve(handle, down);
}

void MainEngine::Resolve(uint64_t handle, absl::Status status) {
  const auto it = jobs_.find(handle);
  if (it == jobs_.end()) return;
  std::shared_ptr<Job> job = std::move(it->second);
  jobs_.erase(it);
  --in_engine_;  // before the promise: its client may look at once
  job->done.set_value(std::move(status));
}

void MainEngine::Iterate() {
  // Requests whose clients left go at this boundary; waiting ones take the
  // free slots.
  std::vector<uint64_t> cancelled;
  for (const auto& [handle, job] : jobs_) {
    if (job->cancelled && job->cancelled()) cancelled.push_back(handle);
  }
  const Scheduler::Boundary boundary = scheduler_->AtBoundary(cancelled);
  const absl::Status gone = absl::CancelledError("the client cancelled the request");
  for (uint64_t handle : boundary.cancelled_waiting) Resolve(handle, gone);
  for (uint64_t handle : boundary.cancelled_running) Finish(*jobs_.at(handle), gone);
  for (const auto& [handle, slot] : boundary.admitted) {
    std::shared_ptr<Job>& job = jobs_.at(handle);
    job->slot = slot;
    running_.push_back(job);
  }
  if (running_.empty()) return;
  RefreshSchedule();
  if (schedule_.empty()) {
    while (!running_.empty()) {
      Job& job = *running_.front();
      Finish(job,
             absl::UnavailableError(
                 job.started ? "no complete worker group is left; the request cannot finish"
                             : "no complete worker group: the cluster cannot serve until workers "
                               "rejoin"));
    }
    return;
  }
  for (auto& job : running_) {
    if (!job->started) BeginJob(*job, /*alone=*/running_.size() == 1);
  }
  const absl::Status st = Step();
  for (size_t i = 0; i < running_.size();) {
    Job& job = *running_[i];
    if (!st.ok()) {
      Finish(job, st);
    } else if (job.seq->done()) {
      Finish(job, absl::OkStatus());
    } else {
      ++i;
    }
  }
}

absl::Status MainEngine::Step() {
  // What the scheduler sees of each running request; each decoding one's
  // alignment goes to the shadow first (its token is what the drafts follow).
  const bool batched = running_.size() > 1;
  std::vector<SeqState> states;
  std::vector<bool> realigned;
  for (const auto& job : running_) {
    const Sequence& seq = *job->seq;
    SeqState s;
    s.handle = job->handle;
    s.request = job->req;
    s.slot = job->slot;
    s.pos = seq.pos();
    s.prefilling = seq.prefilling();
    s.pending = seq.Pending(std::numeric_limits<int64_t>::max());
    bool sent_token = false;
    if (!s.prefilling) {
      s.n = job->forwards + 1;
      s.draft = job->follow.on ? job->follow.draft : 0;
      s.tokens_left = seq.max_tokens() - static_cast<int>(seq.result().output_ids.size());
      s.draft_wait = job->draft_wait > absl::ZeroDuration() && job->waits_pay;
      sent_token = AlignShadow(*job, s.n, s.pending.front(), s.pos, batched);
    }
    states.push_back(s);
    realigned.push_back(sent_token);
  }
  // Speculative decoding: the shadow's drafts that follow each decode token,
  // as many as are ready (or, with a wait, as come within it).
  for (const DraftAsk& a : scheduler_->DraftAsks(states)) {
    Job& job = *running_[a.index];
    SeqState& s = states[a.index];
    const uint32_t n = static_cast<uint32_t>(s.n);
    const int32_t token = s.pending.front();
    s.drafts = a.wait ? links_.predictions().WaitDraftChain(job.req, n, token, a.room,
                                                            realigned[a.index], job.draft_wait)
                      : links_.predictions().DraftChain(job.req, n, token, a.room);
    // A wait that found nothing (the shadow runs behind) is not repeated
    // until drafts are ready again without one.
    if (a.wait) {
      job.waits_pay = !s.drafts.empty();
    } else if (!s.drafts.empty()) {
      job.waits_pay = true;
    }
  }
  return RunPlan(scheduler_->Plan(states));
}

absl::Status MainEngine::RunPlan(const IterationPlan& plan) {
  using Kind = IterationPlan::Kind;
  if (plan.kind == Kind::kIdle) return absl::OkStatus();
  const ModelConfig& c = model_.config();
  executor_->SetStep(plan.key_request, plan.key_token);
  struct ClearLookahead {
    ClusterExpertExecutor& ex;
    ~ClearLookahead() { ex.set_lookahead({}); }
  } clear_lookahead{*executor_};
  std::vector<StepRow> step_rows;  // kShared: every decode row
  if (plan.kind == Kind::kDecode || plan.kind == Kind::kVerify) {
    Job& job = *running_[plan.segments[0].seq];
    const int n = plan.segments[0].n;
    if (job.out.prediction == PredictionMode::kRandom) {
      ODMOE_RETURN_IF_ERROR(hints_->SendRandomHints(job.req, n));
    }
    if (plan.kind == Kind::kDecode && job.out.prediction == PredictionMode::kLookahead) {
      // Gate look-ahead: each decode layer predicts the next one while its
      // experts compute (the executor calls back between sending and
      // waiting; a verification of one request's drafts runs without it).
      const uint64_t req = job.req;
      const LookaheadSpec spec = job.lookahead;
      executor_->set_lookahead([this, req, n, spec](int layer, ConstMat x) {
        return hints_->Lookahead(req, n, spec, layer, x);
      });
    }
  } else if (plan.kind == Kind::kShared) {
    int64_t row = 0;
    bool lookahead = false;
    for (const PlannedSegment& seg : plan.segments) {
      Job& job = *running_[seg.seq];
      for (int r = 0; r < static_cast<int>(seg.tokens.size()); ++r) {
        step_rows.push_back({job.req, seg.n + r, row + r, job.out.prediction, job.lookahead});
        if (job.out.prediction == PredictionMode::kRandom) {
          hints_->PutRandomPredictions(job.req, seg.n + r);
        }
      }
      lookahead = lookahead || job.out.prediction == PredictionMode::kLookahead;
      row += static_cast<int64_t>(seg.tokens.size());
    }
    const uint64_t key_request = plan.key_request;
    const uint32_t key_token = plan.key_token;
    executor_->SetSharedStep([this, key_request, key_token, &step_rows](int layer) {
      hints_->HintStep(key_request, key_token, step_rows, layer + 1);
    });
    if (lookahead) {
      executor_->set_lookahead([this, key_request, key_token, &step_rows](int layer, ConstMat x) {
        ODMOE_RETURN_IF_ERROR(hints_->LookaheadRows(step_rows, layer, x));
        hints_->HintStep(key_request, key_token, step_rows, layer + 1);
        return absl::OkStatus();
      });
    }
    hints_->HintStep(key_request, key_token, step_rows, 0);
  }
  // The forward of every segment, then each request's rows' logits: the last
  // row of a segment, every row of one that verifies drafts.
  const std::vector<int32_t> tokens = plan.tokens();
  std::vector<Transformer::Segment> segments;
  std::vector<int64_t> logit_rows;
  int64_t row = 0;
  for (const PlannedSegment& seg : plan.segments) {
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    segments.push_back({seg.slot, seg.pos0, n});
    for (int64_t r = seg.drafts() > 0 ? 0 : n - 1; r < n; ++r) logit_rows.push_back(row + r);
    row += n;
  }
  ODMOE_RETURN_IF_ERROR(transformer_->ForwardSegments(tokens, segments, *executor_));
  std::vector<float> logits;
  if (logit_rows.size() == segments.size()) {
    ODMOE_RETURN_IF_ERROR(transformer_->SegmentLogits(&logits));
  } else {
    ODMOE_RETURN_IF_ERROR(transformer_->LogitsOfRows(logit_rows, &logits));
  }
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  const ExpertTaskStats stats = executor_->TakeStats();
  if (plan.segments.size() > 1) {
    ++shared_iterations_;
    shared_rows_ += tokens.size();
  }
  // Each request takes its rows: samples, counts the routing of the rows
  // whose inputs were right (recall) and its speculation.
  const std::span<const float> all(logits);
  size_t logit_row = 0;
  row = 0;
  // Recurrent layers' state cannot be cut at a position: where fewer drafts
  // were accepted than verified, the accepted rows run again (Replay).
  std::vector<int32_t> replay_tokens;
  std::vector<Transformer::Segment> replay;
  for (const PlannedSegment& seg : plan.segments) {
    Job& job = *running_[seg.seq];
    Sequence& seq = *job.seq;
    const int64_t n = static_cast<int64_t>(seg.tokens.size());
    if (!seg.decode) {
      seq.Consumed(n, all.subspan(logit_row * n_vocab, n_vocab));
      ++logit_row;
    } else {
      int accepted = 0;
      if (seg.drafts() == 0) {
        seq.Consumed(1, all.subspan(logit_row * n_vocab, n_vocab));
      } else {
        accepted =
            seq.ConsumedDrafts(std::span<const int32_t>(seg.tokens).subspan(1),
                               all.subspan(logit_row * n_vocab, static_cast<size_t>(n) * n_vocab));
      }
      logit_row += static_cast<size_t>(seg.drafts()) + 1;
      if (accepted < seg.drafts() && !transformer_->recurrent_state().empty() && !seq.done()) {
        replay.push_back({seg.slot, seg.pos0, accepted + 1});
        replay_tokens.insert(replay_tokens.end(), seg.tokens.begin(),
                             seg.tokens.begin() + accepted + 1);
      }
      // Rows 0..accepted ran on the right inputs: iterations n..n + accepted.
      RecordActual(job, seg.n, row, accepted + 1);
      job.forwards = seg.n + accepted;
      SpeculationStats& spec = job.out.speculation;
      spec.drafted += static_cast<uint64_t>(seg.drafts());
      if (plan.segments.size() > 1) shared_drafts_ += static_cast<uint64_t>(seg.drafts());
      spec.accepted += static_cast<uint64_t>(accepted);
      ++spec.iterations;
      spec.tokens += static_cast<uint64_t>(accepted) + 1;
    }
    // The iteration's tasks served every request in it.
    AddStats(job.out.experts, stats);
    row += n;
  }
  return Replay(plan, replay_tokens, replay);
}

absl::Status MainEngine::Replay(const IterationPlan& plan, std::span<const int32_t> tokens,
                                std::span<const Transformer::Segment> segments) {
  if (segments.empty()) return absl::OkStatus();
  // The state before the verification is each slot's checkpoint
  // (engine/recurrent_state.h): from it, the decode token and the accepted
  // drafts bring the state to the sequence's position, at the cost of those
  // rows' experts once more. Nothing is sampled; the step's key stays (no
  // look-ahead, no shared-step hints: the rows were hinted already).
  executor_->set_lookahead({});
  executor_->SetStep(plan.key_request, plan.key_token);
  ODMOE_RETURN_IF_ERROR(transformer_->ForwardSegments(tokens, segments, *executor_));
  replayed_rows_ += tokens.size();
  return absl::OkStatus();
}

void MainEngine::BeginJob(Job& job, bool alone) {
  job.started = true;
  job.req = NextRequestId();
  job.out.request_id = job.req;
  job.out.prediction = job.mode;
  job.bytes_before = links_.bytes();
  links_.predictions().Track(job.req);
  const bool wants_shadow = job.mode == PredictionMode::kShadow || job.follow.draft > 0;
  if (!wants_shadow) return;
  if (!links_.shadow_connected()) {
    ODMOE_LOG_WARN("request {}: the shadow is not connected; running without {}", job.req,
                   job.mode == PredictionMode::kShadow ? "prediction" : "drafts");
  } else if (shadow_->Begin(job.follow, job.req, job.seq->result().prompt_ids,
                            job.request.max_tokens, job.mode != PredictionMode::kShadow, !alone)) {
    job.out.speculation.draft_tokens = job.follow.draft;
    job.out.token_period = job.follow.token_period;
    job.out.kv_period = job.follow.kv_period;
    return;
  }
  if (job.mode == PredictionMode::kShadow) job.out.prediction = PredictionMode::kNone;
}

void MainEngine::RecordActual(Job& job, int n, int64_t row0, int rows) {
  const ModelConfig& c = model_.config();
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    if (!c.has_experts(l)) continue;  // interleaved dense layers (Llama 4)
    const auto& actual = executor_->actual()[static_cast<size_t>(l)];
    for (int r = 0; r < rows; ++r) {
      const size_t row = static_cast<size_t>(row0 + r);
      if (row < actual.size()) job.recall.RecordActual(n + r, l, actual[row]);
    }
  }
}

bool MainEngine::AlignShadow(Job& job, int n, int32_t token, int pos, bool batched) {
  if (!job.follow.on) return false;
  const bool sent = shadow_->Align(job.follow, job.req, n, token, pos, job.slot, batched, trace_);
  if (!job.follow.on && job.mode == PredictionMode::kShadow) {
    job.out.prediction = PredictionMode::kNone;  // the link broke
  }
  return sent;
}

void MainEngine::Finish(Job& job, absl::Status status) {
  shadow_->End(job.follow, job.req, job.forwards > 0);
  PredictionBoard::Page predictions;
  if (job.started) {
    predictions = links_.predictions().Snapshot(job.req);
    links_.predictions().Forget(job.req);
  }
  ClusterGenerateResult& out = job.out;
  if (job.started) out.bytes = links_.bytes() - job.bytes_before;
  out.alignment_seconds = job.follow.alignment_seconds;
  out.schedule_version = schedule_.version;
  out.live_groups = static_cast<int>(schedule_.groups.size());
  scheduler_->Finished(job.handle);
  const auto it = jobs_.find(job.handle);
  std::shared_ptr<Job> keep = std::move(it->second);  // alive until its promise is kept
  jobs_.erase(it);
  if (auto r = std::find(running_.begin(), running_.end(), keep); r != running_.end()) {
    running_.erase(r);
  }
  --in_engine_;  // before the promise: its client may look at once
  if (!status.ok()) {
    keep->done.set_value(status);
    return;
  }
  out.result = keep->seq->TakeResult();
  for (const auto& [where, experts] : predictions) {
    keep->recall.RecordPrediction(static_cast<int>(where.first), static_cast<int>(where.second),
                                  experts);
  }
  out.recall = keep->recall.Summarize(keep->forwards);
  keep->done.set_value(std::move(out));
}

absl::Status MainEngine::ValidateScore(std::span<const int32_t> tokens,
                                       const ScoreOptions& options) const {
  return ValidateScoreRequest(tokens, options, model_.config().n_vocab, n_ctx());
}

absl::StatusOr<ClusterScoreResult> MainEngine::Score(std::span<const int32_t> tokens,
                                                     const ScoreOptions& options) {
  std::lock_guard<std::mutex> lock(generate_mu_);
  ODMOE_RETURN_IF_ERROR(ValidateScore(tokens, options));
  ClusterScoreResult out;
  out.request_id = NextRequestId();
  const LinkBytes bytes_before = links_.bytes();
  RefreshSchedule();
  if (schedule_.empty()) {
    return absl::UnavailableError(
        "no complete worker group: the cluster cannot serve until workers rejoin");
  }
  executor_->SetStep(out.request_id, 0);
  absl::StatusOr<ScoreResult> r = ScoreTokens(*transformer_, *executor_, tokens, options);
  out.experts = executor_->TakeStats();
  out.bytes = links_.bytes() - bytes_before;
  if (!r.ok()) return r.status();
  out.score = std::move(*r);
  return out;
}

}  // namespace odmoe
