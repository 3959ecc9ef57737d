#include "main_node/main_node.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_registry.h"
#include "cluster/node_probe.h"
#include "main_node/http_api.h"
#include "main_node/main_call_limits.h"
#include "main_node/main_service.h"
#include "main_node/worker_metrics.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<std::unique_ptr<MainNode>> MainNode::Create(const Topology& topology,
                                                           const std::string& node_id) {
  if (topology.main.id != node_id) {
    return absl::NotFoundError(absl::StrFormat("%s: the main node's id is '%s', not '%s'",
                                               topology.path, topology.main.id, node_id));
  }
  std::unique_ptr<MainNode> m(new MainNode());
  m->id_ = node_id;
  ODMOE_ASSIGN_OR_RETURN(auto auth, PeerAuth::ForNode(topology, PeerRole::kMain, node_id));
  m->SetPeerAuth(std::move(auth));
  m->topology_ = topology;
  ODMOE_ASSIGN_OR_RETURN(m->model_, ModelFile::Open(topology.model));
  ODMOE_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::FromGguf(m->model_->gguf()));
  if (m->tokenizer_->n_vocab() != m->model_->config().n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: tokenizer has %d tokens but token_embd has %d rows", topology.model,
                        m->tokenizer_->n_vocab(), m->model_->config().n_vocab));
  }
  ODMOE_ASSIGN_OR_RETURN(m->backend_, CreateBackend(topology.main.backend));
  m->links_ = ClusterLinks::Create(m->topology_, m->model_->config(), node_id,
                                   m->model_->fingerprint(), *m->peer_auth());
  ODMOE_ASSIGN_OR_RETURN(m->engine_, MainEngine::Create(m->topology_, *m->model_, *m->tokenizer_,
                                                        *m->backend_, *m->links_));
  m->engine_->set_trace(&m->trace());
  m->service_ = std::make_unique<MainService>(*m);
  m->queue_ = std::make_unique<RequestQueue>(topology.main.max_queue, topology.main.max_running);
  m->metrics_ = std::make_unique<MainMetrics>(m->model_->config().n_layer);
  m->worker_metrics_ =
      std::make_unique<WorkerMetricsPoller>(topology.workers, kWorkerMetricsPeriod);
  m->model_id_ = std::filesystem::path(topology.model).stem().string();
  for (int32_t id = 0; id < m->tokenizer_->n_vocab(); ++id) {
    m->max_token_bytes_ = std::max({m->max_token_bytes_, m->tokenizer_->vocab().tokens[id].size(),
                                    m->tokenizer_->TokenToPiece(id).size()});
  }
  if (!topology.main.http.empty()) {
    ODMOE_ASSIGN_OR_RETURN(m->http_, HttpApi::Start(*m));
  }
  ODMOE_LOG_INFO("main: {} workers in {} group{} of {}, prediction {}, backend {}",
                 topology.n_workers(), topology.n_groups(), topology.n_groups() == 1 ? "" : "s",
                 topology.group_size, PredictionModeName(topology.prediction), m->backend_->name());
  return m;
}

MainNode::~MainNode() { Shutdown(); }

std::vector<grpc::Service*> MainNode::services() { return {service_->grpc_service()}; }

absl::Status MainNode::Start() {
  SetState(v1::NODE_STATE_STARTING, "connecting to the workers and the shadow");
  worker_metrics_->Start();
  connector_ = std::thread([this] {
    absl::Status s = links_->Connect(cancel_);
    if (s.ok()) {
      ODMOE_LOG_INFO("cluster connected; ready");
      links_->StartRejoin();
      SetState(v1::NODE_STATE_READY);
      worker_metrics_->RefreshNow();  // the workers' series as the cluster starts serving
    } else if (!cancel_.load()) {
      ODMOE_LOG_ERROR("{}", s.message());
      SetState(v1::NODE_STATE_FAILED, std::string(s.message()));
    }
  });
  return absl::OkStatus();
}

void MainNode::Shutdown() {
  if (cancel_.exchange(true)) return;
  SetState(v1::NODE_STATE_DRAINING, "shutting down");
  if (http_) http_->Stop();
  if (worker_metrics_) worker_metrics_->Stop();
  if (connector_.joinable()) connector_.join();
  if (links_) links_->Close();
  // Requests still in the engine end now (their handlers return), before
  // the node's parts they report to go away.
  if (engine_) engine_->Stop();
}

absl::Status MainNode::CanServe() const {
  if (state() != v1::NODE_STATE_READY) {
    return absl::UnavailableError(absl::StrFormat("the cluster cannot serve (%s): %s",
                                                  NodeStateName(state()), state_detail()));
  }
  if (!engine_->HasCompleteGroup()) {
    return absl::UnavailableError(
        "no complete worker group: every group has a worker that is down or timed out lately; "
        "waiting for workers to rejoin");
  }
  return absl::OkStatus();
}

absl::Status MainNode::Health() const {
  ODMOE_RETURN_IF_ERROR(CanServe());
  if (topology_.shadow && !links_->shadow_connected()) {
    if (topology_.prediction == PredictionMode::kShadow) {
      return absl::UnavailableError(
          "prediction fell back to none: the shadow is not connected (requests run without "
          "prefetching, slower, with identical output, until it is back)");
    }
    if (topology_.shadow->draft_tokens > 0) {
      return absl::UnavailableError(
          "speculative decoding is off: the shadow is not connected (requests run without "
          "drafts, slower, with identical output, until it is back)");
    }
  }
  return absl::OkStatus();
}

size_t MainNode::max_receive_message_bytes() const {
  const size_t ctx = static_cast<size_t>(n_ctx());
  const size_t prompt = ctx * max_token_bytes_ + ctx * 5;  // text, or varint ids
  return std::max(kMaxTokenizeTextBytes, prompt) + (64u << 10);
}

absl::Status MainNode::CheckPromptSize(const GenerateRequest& request) const {
  const size_t ctx = static_cast<size_t>(n_ctx());
  if (request.prompt_ids.size() > ctx) {
    return absl::OutOfRangeError(absl::StrFormat(
        "the prompt's %d tokens exceed the context of %d tokens", request.prompt_ids.size(), ctx));
  }
  if (request.prompt_ids.empty() && request.prompt.size() > ctx * max_token_bytes_) {
    return absl::OutOfRangeError(absl::StrFormat(
        "the prompt's %d bytes cannot fit the context of %d tokens (at most %d bytes per token)",
        request.prompt.size(), ctx, max_token_bytes_));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestQueue::Turn> MainNode::Admit(const std::function<bool()>& cancelled) {
  if (absl::Status s = CanServe(); !s.ok()) return s;
  return queue_->Enter(cancelled);
}

absl::StatusOr<std::vector<int32_t>> MainNode::Validate(const GenerateRequest& request) const {
  ODMOE_RETURN_IF_ERROR(CheckPromptSize(request));
  return engine_->Validate(request);
}

namespace {
std::string Outcome(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
      return "invalid";
    case absl::StatusCode::kResourceExhausted:
      return "busy";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    default:
      return "error";
  }
}
}  // namespace

void MainNode::CountRejected(const std::string& api, const absl::Status& status) {
  metrics_->RequestDone(api, Outcome(status));
}

absl::StatusOr<ClusterGenerateResult> MainNode::Generate(
    const RequestQueue::Turn& turn, const GenerateRequest& request,
    const GenerationCallback& on_token, const std::function<bool()>& cancelled,
    const std::function<bool()>& should_stop, const std::string& api, const Experiment& experiment,
    const std::function<void(const RowScore&)>& on_logprobs) {
  (void)turn;  // holding it is the point
  auto last = std::chrono::steady_clock::now();
  bool first = true;
  auto timed = [&](int32_t id, std::string_view text) {
    const auto now = std::chrono::steady_clock::now();
    if (!first) metrics_->ObserveInterToken(std::chrono::duration<double>(now - last).count());
    first = false;
    last = now;
    if (on_token) on_token(id, text);
  };
  absl::StatusOr<ClusterGenerateResult> r =
      engine_->Generate(request, timed, cancelled, should_stop, experiment, on_logprobs);
  metrics_->RequestDone(api, Outcome(r.status()));
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++requests_;
  if (!r.ok()) {
    ++failures_;
    return r;
  }
  metrics_->Generation(*r);
  tokens_ += r->result.output_ids.size();
  if (CountsForRecall(*r)) last_recall_ = r->recall.overall;
  last_decode_tps_ = r->result.stats.decode_tokens_per_second();
  return r;
}

absl::StatusOr<ClusterGenerateResult> MainNode::Generate(const GenerateRequest& request,
                                                         const GenerationCallback& on_token,
                                                         const std::function<bool()>& cancelled,
                                                         const std::string& api,
                                                         const Experiment& experiment) {
  absl::StatusOr<RequestQueue::Turn> turn = Admit(cancelled);
  if (!turn.ok()) {
    CountRejected(api, turn.status());
    return turn.status();
  }
  return Generate(*turn, request, on_token, cancelled, {}, api, experiment);
}

absl::StatusOr<ClusterScoreResult> MainNode::Score(std::span<const int32_t> tokens,
                                                   const ScoreOptions& options,
                                                   const std::function<bool()>& cancelled) {
  if (absl::Status s = engine_->ValidateScore(tokens, options); !s.ok()) {
    CountRejected("score", s);
    return s;
  }
  absl::StatusOr<RequestQueue::Turn> turn = Admit(cancelled);
  if (!turn.ok()) {
    CountRejected("score", turn.status());
    return turn.status();
  }
  return Score(*turn, tokens, options);
}

absl::StatusOr<ClusterScoreResult> MainNode::Score(const RequestQueue::Turn& turn,
                                                   std::span<const int32_t> tokens,
                                                   const ScoreOptions& options) {
  (void)turn;  // holding it is the point
  absl::StatusOr<ClusterScoreResult> r = engine_->Score(tokens, options);
  metrics_->RequestDone("score", Outcome(r.status()));
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++requests_;
  if (!r.ok()) ++failures_;
  return r;
}

void MainNode::RefreshWorkerMetrics() { worker_metrics_->Refresh(); }

int MainNode::http_port() const { return http_ ? http_->port() : 0; }

std::string MainNode::RenderMetrics() const {
  // The workers' series from the poller's last snapshot (never a probe
  // here: a scrape costs no worker call); the rest is live.
  std::string workers = worker_metrics_->Text();
  const Schedule schedule = engine_->schedule();
  AppendMetricFamily(&workers, "odmoe_schedule_version", "gauge",
                     "Version of the layer-to-group schedule.",
                     absl::StrFormat("odmoe_schedule_version %d\n", schedule.version));
  AppendMetricFamily(&workers, "odmoe_worker_groups_live", "gauge", "Worker groups taking layers.",
                     absl::StrFormat("odmoe_worker_groups_live %d\n", schedule.groups.size()));
  AppendMetricFamily(&workers, "odmoe_batched_iterations_total", "counter",
                     "Iterations that carried rows of several requests at once.",
                     absl::StrFormat("odmoe_batched_iterations_total %d\n",
                                     engine_->shared_iterations()));
  AppendMetricFamily(&workers, "odmoe_batched_rows_total", "counter",
                     "Rows (prompt and decode tokens) those iterations carried.",
                     absl::StrFormat("odmoe_batched_rows_total %d\n", engine_->shared_rows()));
  return metrics_->Render(queue_->running(), queue_->waiting(), workers);
}

void MainNode::FillStatus(v1::NodeStatus* status) const {
  auto add = [status](const std::string& k, const std::string& v) { AddStatusEntry(status, k, v); };
  add("workers",
      absl::StrFormat("%d in %d group%s of %d", topology_.n_workers(), topology_.n_groups(),
                      topology_.n_groups() == 1 ? "" : "s", topology_.group_size));
  add("prediction", std::string(PredictionModeName(topology_.prediction)));
  // The same verdict as /health: "yes", or "no: why" (odmoe-cluster status
  // shows it and counts the cluster as not ready).
  const absl::Status can = CanServe();
  add("serving", can.ok() ? "yes" : absl::StrCat("no: ", can.message()));
  // GET /health's verdict: also "degraded" while prediction fell back to none.
  const absl::Status health = Health();
  add("health", health.ok()
                    ? "ok"
                    : absl::StrCat(can.ok() ? "degraded: " : "unavailable: ", health.message()));
  add("shadow_connected", links_->shadow_connected() ? "yes" : "no");
  const Schedule schedule = engine_->schedule();
  add("schedule_version", absl::StrCat(schedule.version));
  add("live_groups", absl::StrJoin(schedule.groups, ","));
  add("active_workers", absl::StrCat(engine_->active_workers()));
  std::lock_guard<std::mutex> lock(stats_mu_);
  add("requests", absl::StrCat(requests_));
  add("failures", absl::StrCat(failures_));
  add("generated_tokens", absl::StrCat(tokens_));
  add("last_recall", absl::StrFormat("%.4f", last_recall_));
  add("last_decode_tokens_per_second", absl::StrFormat("%.1f", last_decode_tps_));
}

}  // namespace odmoe
