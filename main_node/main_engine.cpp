#include "main_node/main_engine.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_format.h"
#include "cluster/assignment.h"
#include "cluster/wire.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {
constexpr absl::Duration kShadowDrain = absl::Seconds(2);
// A shadow silent for this many requests in a row has lost its channel (one
// silent request can be a slow prefill of a long prompt).
constexpr int kSilentShadowRequests = 2;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

absl::StatusOr<std::unique_ptr<MainEngine>> MainEngine::Create(const Topology& topology,
                                                               const ModelFile& model,
                                                               const Tokenizer& tokenizer,
                                                               Backend& backend,
                                                               ClusterLinks& links) {
  std::unique_ptr<MainEngine> e(new MainEngine(topology, model, tokenizer, links));
  Transformer::Options topt;
  topt.n_ctx = topology.main.context;
  topt.n_batch = topology.main.batch;
  ODMOE_ASSIGN_OR_RETURN(e->transformer_, Transformer::Create(model, backend, topt));
  ODMOE_ASSIGN_OR_RETURN(e->executor_,
                         ClusterExpertExecutor::Create(model.config(), backend, topology, links,
                                                       e->transformer_->n_batch()));
  e->schedule_ = Schedule::AllGroups(topology);
  e->active_groups_ = topology.n_groups();
  e->executor_->SetSchedule(&e->schedule_, &e->schedule_mu_);
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

void MainEngine::FillSchedule(google::protobuf::RepeatedField<int32_t>* groups,
                              uint64_t* version) const {
  for (int g : schedule_.groups) groups->Add(g);
  *version = schedule_.version;
}

uint64_t MainEngine::NextRequestId() {
  // Increasing across restarts of the main node too: workers and the shadow
  // treat smaller request ids as finished.
  const uint64_t now_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  last_request_ = std::max(last_request_ + 1, now_ms);
  return last_request_;
}

absl::Status MainEngine::SendAlignment(uint64_t request, int n, int32_t token, int pos,
                                       bool send_token, bool send_kv, bool send_schedule,
                                       int* kv_sent) {
  const ModelConfig& c = model_.config();
  const int first = *kv_sent;
  const int count = send_kv ? pos - first : 0;
  const int64_t w = c.kv_width();
  const int chunk =
      std::max<int>(1, static_cast<int>(kKvChunkBytes / (2 * c.n_layer * w * sizeof(float))));
  int sent = 0;
  do {
    const int m = std::min(chunk, count - sent);
    v1::ShadowRequest req;
    v1::ShadowAlign* a = req.mutable_align();
    a->set_request(request);
    a->set_token(static_cast<uint32_t>(n));
    if (send_token) {
      a->set_has_token(true);
      a->set_token_id(token);
    }
    if (send_schedule && sent == 0) {
      uint64_t version = 0;
      FillSchedule(a->mutable_live_groups(), &version);
      a->set_schedule_version(version);
    }
    if (m > 0) {
      const size_t layer_floats = static_cast<size_t>(m * w);
      KvCache& kv = transformer_->kv_cache();
      const bool with_v = !kv.v_in_k();  // MLA: V is inside the K rows
      kv_k_.resize(layer_floats * c.n_layer);
      kv_v_.resize(with_v ? layer_floats * c.n_layer : 0);
      for (int l = 0; l < c.n_layer; ++l) {
        ODMOE_RETURN_IF_ERROR(transformer_->backend().CopyToHost(kv_k_.data() + l * layer_floats,
                                                                 kv.k(l).Row(first + sent),
                                                                 layer_floats * sizeof(float)));
        if (!with_v) continue;
        ODMOE_RETURN_IF_ERROR(transformer_->backend().CopyToHost(kv_v_.data() + l * layer_floats,
                                                                 kv.v(l).Row(first + sent),
                                                                 layer_floats * sizeof(float)));
      }
      v1::KvRows* rows = a->mutable_kv();
      rows->set_first_pos(static_cast<uint32_t>(first + sent));
      rows->set_count(static_cast<uint32_t>(m));
      EncodeRows(kv_k_.data(), int64_t{m} * c.n_layer, w, v1::WIRE_DTYPE_F32, rows->mutable_k());
      if (with_v) {
        EncodeRows(kv_v_.data(), int64_t{m} * c.n_layer, w, v1::WIRE_DTYPE_F32,
                   rows->mutable_v());
      }
      sent += m;
    }
    a->set_kv_more(sent < count);
    ODMOE_RETURN_IF_ERROR(links_.SendToShadow(req));
  } while (sent < count);
  if (send_kv) *kv_sent = pos;
  return absl::OkStatus();
}

absl::Status MainEngine::SendRandomHints(uint64_t request, int n) {
  const ModelConfig& c = model_.config();
  std::mt19937_64 rng(request * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(n));
  std::vector<int32_t> pool(static_cast<size_t>(c.n_expert));
  for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
    for (int e = 0; e < c.n_expert; ++e) pool[static_cast<size_t>(e)] = e;
    for (int j = 0; j < c.n_expert_used; ++j) {
      std::uniform_int_distribution<int> pick(j, c.n_expert - 1);
      std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(pick(rng))]);
    }
    SendHint(request, n, l, std::vector<int32_t>(pool.begin(), pool.begin() + c.n_expert_used));
  }
  return absl::OkStatus();
}

void MainEngine::SendHint(uint64_t request, int n, int layer, std::vector<int32_t> predicted) {
  const ModelConfig& c = model_.config();
  v1::WorkerRequest req;
  v1::Hint* hint = req.mutable_hint();
  hint->mutable_key()->set_request(request);
  hint->mutable_key()->set_token(static_cast<uint32_t>(n));
  hint->mutable_key()->set_layer(static_cast<uint32_t>(layer));
  for (int32_t e : predicted) hint->add_experts(static_cast<uint32_t>(e));
  links_.predictions().Put(request, static_cast<uint32_t>(n), static_cast<uint32_t>(layer),
                           std::move(predicted));
  const std::vector<int> members = topology_.GroupMembers(schedule_.GroupOfLayer(layer));
  for (size_t i = 0; i < members.size(); ++i) {
    // Only workers with positions of this layer (cluster/assignment.h).
    if (PositionsOfWorker(static_cast<int>(i), topology_.group_size, c.n_expert_used).empty()) {
      continue;
    }
    // A failed send is the group's failure, which the layer's task finds.
    links_.SendToWorker(members[i], req).IgnoreError();
  }
}

absl::Status MainEngine::Lookahead(uint64_t request, int n, int layer, ConstMat x) {
  const ModelConfig& c = model_.config();
  const int next = layer + 1;
  if (next >= c.n_layer || !c.has_experts(next)) return absl::OkStatus();
  std::vector<int32_t> predicted;
  ODMOE_RETURN_IF_ERROR(transformer_->PredictExperts(next, x, &predicted));
  SendHint(request, n, next, std::move(predicted));
  return absl::OkStatus();
}

void MainEngine::set_trace(TraceRecorder* trace) {
  trace_ = trace;
  executor_->set_trace(trace);
}

absl::StatusOr<std::vector<int32_t>> MainEngine::Validate(const GenerateRequest& request) const {
  return PreparePrompt(request, tokenizer_, n_ctx());
}

absl::StatusOr<ClusterGenerateResult> MainEngine::Generate(
    const GenerateRequest& request, const GenerationCallback& on_token,
    const std::function<bool()>& cancelled, const std::function<bool()>& should_stop,
    const Experiment& experiment, const std::function<void(const RowScore&)>& on_logprobs) {
  std::lock_guard<std::mutex> lock(generate_mu_);
  const PredictionMode mode = experiment.prediction.value_or(topology_.prediction);
  if (mode == PredictionMode::kShadow && !topology_.shadow) {
    return absl::InvalidArgumentError(
        "experiment: prediction 'shadow' needs a shadow node, and this cluster has none");
  }
  if (mode != PredictionMode::kNone && topology_.worker_mode == WorkerMode::kLruCache) {
    return absl::InvalidArgumentError(
        "experiment: lru_cache workers use no prediction (expected prediction none)");
  }
  if (experiment.token_period.has_value() != experiment.kv_period.has_value() ||
      experiment.token_period.value_or(0) < 0 || experiment.kv_period.value_or(0) < 0 ||
      experiment.token_period.value_or(0) > (1 << 20) ||
      experiment.kv_period.value_or(0) > (1 << 20)) {
    return absl::InvalidArgumentError(
        "experiment: alignment needs both token_period and kv_period in [0, 1048576]");
  }
  ODMOE_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_ids,
                         PreparePrompt(request, tokenizer_, n_ctx()));
  const ModelConfig& c = model_.config();
  ClusterGenerateResult out;
  const uint64_t req = NextRequestId();
  out.request_id = req;
  links_.predictions().Reset(req);
  out.prediction = mode;
  const LinkBytes bytes_before = links_.bytes();
  bool use_shadow = mode == PredictionMode::kShadow && links_.shadow_connected();
  if (mode == PredictionMode::kShadow && !use_shadow) {
    ODMOE_LOG_WARN("request {}: the shadow is not connected; running without prediction", req);
    out.prediction = PredictionMode::kNone;
  }
  const int token_period =
      experiment.token_period.value_or(topology_.shadow ? topology_.shadow->token_period : 0);
  const int kv_period =
      experiment.kv_period.value_or(topology_.shadow ? topology_.shadow->kv_period : 0);
  if (use_shadow) {
    out.token_period = token_period;
    out.kv_period = kv_period;
  }
  RecallCounter recall(c.n_layer, c.n_expert_used, c.n_dense_leading);
  int kv_sent = 0;
  int forwards = 0;
  auto record_actual = [&](int n) {
    for (int l = c.n_dense_leading; l < c.n_layer; ++l) {
      recall.RecordActual(n, l, executor_->actual()[l]);
    }
  };
  auto shadow_failed = [&](const absl::Status& s) {
    ODMOE_LOG_WARN("request {}: shadow link failed ({}); continuing without prediction", req,
                   s.message());
    use_shadow = false;
    out.prediction = PredictionMode::kNone;
  };

  // Gate look-ahead: each decode layer predicts the next one while its
  // experts compute (the executor calls back between sending and waiting).
  if (mode == PredictionMode::kLookahead) {
    executor_->set_lookahead([this, req](int layer, ConstMat x) {
      return Lookahead(req, static_cast<int>(executor_->token()), layer, x);
    });
  }
  struct ClearLookahead {
    ClusterExpertExecutor& ex;
    ~ClearLookahead() { ex.set_lookahead({}); }
  } clear_lookahead{*executor_};

  GenerationHooks hooks;
  hooks.should_stop = should_stop;
  hooks.on_logprobs = on_logprobs;
  uint64_t shadow_version = 0;
  auto schedule_changed = [&] { return schedule_.version != shadow_version; };
  hooks.before_prefill = [&](const std::vector<int32_t>& ids) -> absl::Status {
    RefreshSchedule();
    if (schedule_.empty()) {
      return absl::UnavailableError(
          "no complete worker group: the cluster cannot serve until workers rejoin");
    }
    executor_->SetStep(req, 0);
    if (!use_shadow) return absl::OkStatus();
    v1::ShadowRequest begin;
    v1::ShadowBegin* b = begin.mutable_begin();
    b->set_request(req);
    for (int32_t id : ids) b->add_prompt_ids(id);
    b->set_max_tokens(static_cast<uint32_t>(request.max_tokens));
    b->set_token_period(static_cast<uint32_t>(token_period));
    b->set_kv_period(static_cast<uint32_t>(kv_period));
    uint64_t version = 0;
    FillSchedule(b->mutable_live_groups(), &version);
    b->set_schedule_version(version);
    shadow_version = version;
    if (absl::Status s = links_.SendToShadow(begin); !s.ok()) shadow_failed(s);
    return absl::OkStatus();
  };
  hooks.before_decode = [&](int n, int32_t token, int pos) -> absl::Status {
    if (cancelled && cancelled()) return absl::CancelledError("the client cancelled the request");
    if (n > 1) record_actual(n - 1);
    forwards = n;
    RefreshSchedule();
    if (schedule_.empty()) {
      return absl::UnavailableError("no complete worker group is left; the request cannot finish");
    }
    if (use_shadow) {
      TraceSpan span(trace_, "align", "shadow link", req, static_cast<uint32_t>(n), -1);
      const auto t0 = std::chrono::steady_clock::now();
      const bool send_token = token_period > 0 && n % token_period == 0;
      const bool send_kv = kv_period > 0 && n % kv_period == 0;
      absl::Status s =
          SendAlignment(req, n, token, pos, send_token, send_kv, schedule_changed(), &kv_sent);
      shadow_version = schedule_.version;
      out.alignment_seconds += Since(t0);
      if (!s.ok()) shadow_failed(s);
    } else if (mode == PredictionMode::kRandom) {
      ODMOE_RETURN_IF_ERROR(SendRandomHints(req, n));
    }
    executor_->SetStep(req, static_cast<uint32_t>(n));
    return absl::OkStatus();
  };
  absl::StatusOr<GenerateResult> result = RunGeneration(
      *transformer_, *executor_, tokenizer_, request, std::move(prompt_ids), on_token, hooks);
  if (forwards > 0 && result.ok()) record_actual(forwards);
  if (use_shadow) {
    v1::ShadowRequest end;
    end.mutable_end()->set_request(req);
    bool silent = false;
    if (links_.SendToShadow(end).ok() && !links_.predictions().WaitDone(req, kShadowDrain)) {
      ODMOE_LOG_WARN("request {}: the shadow did not finish within {}", req,
                     absl::FormatDuration(kShadowDrain));
      silent = forwards > 0 && links_.predictions().Snapshot().empty();
    }
    silent_shadow_requests_ = silent ? silent_shadow_requests_ + 1 : 0;
    if (silent_shadow_requests_ >= kSilentShadowRequests) {
      // Open but silent: its replies go nowhere. A fresh stream re-aligns it.
      links_.ResetShadow(absl::StrFormat(
          "sent neither a prediction nor an end for %d requests in a row", silent_shadow_requests_));
      silent_shadow_requests_ = 0;
    }
  }
  out.experts = executor_->TakeStats();
  out.bytes = links_.bytes() - bytes_before;
  out.schedule_version = schedule_.version;
  out.live_groups = static_cast<int>(schedule_.groups.size());
  if (!result.ok()) return result.status();
  out.result = std::move(*result);
  for (const auto& [where, experts] : links_.predictions().Snapshot()) {
    recall.RecordPrediction(static_cast<int>(where.first), static_cast<int>(where.second), experts);
  }
  out.recall = recall.Summarize(forwards);
  return out;
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
