#include "main_node/cluster_executor.h"

#include "cluster/precision_schedule.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "cluster/assignment.h"
#include "cluster/wire.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {
}  // namespace

absl::StatusOr<std::unique_ptr<ClusterExpertExecutor>> ClusterExpertExecutor::Create(
    const ModelConfig& config, Backend& backend, const Topology& topology, ClusterLinks& links,
    int max_rows) {
  if (topology.n_groups() < 1) return absl::InvalidArgumentError("no complete worker group");
  std::unique_ptr<ClusterExpertExecutor> ex(
      new ClusterExpertExecutor(config, backend, topology, links));
  ex->max_rows_ = max_rows;
  const size_t rows = static_cast<size_t>(max_rows);
  const size_t d = static_cast<size_t>(config.n_embd);
  ODMOE_ASSIGN_OR_RETURN(ex->work_, backend.Allocate(rows * (d + 2) * sizeof(float)));
  ex->ye_ = static_cast<float*>(ex->work_->data());
  ex->idx_ = reinterpret_cast<int32_t*>(ex->ye_ + rows * d);
  ex->scale_ = ex->ye_ + rows * d + rows;
  ex->zeros_.assign(rows * d, 0.0f);
  ex->host_x_.resize(rows * d);
  ex->host_gather_.resize(rows * d);
  ex->actual_.assign(static_cast<size_t>(config.n_layer), {});
  return ex;
}

bool ClusterExpertExecutor::Quarantined(int group) const {
  std::lock_guard<std::mutex> lock(quarantine_mu_);
  auto it = quarantine_.find(group);
  return it != quarantine_.end() && std::chrono::steady_clock::now() < it->second.until;
}

bool ClusterExpertExecutor::SubCritical(int layer, const RoutingPlan& plan, size_t p) const {
  if (!topology_.mixed_precision) return false;
  const int t = CriticalExperts(layer, config_.n_layer, config_.n_expert_used,
                                topology_.mixed_precision->floor);
  if (t >= config_.n_expert_used) return false;
  const RoutingPlan::ExpertRows& er = plan.experts[p];
  for (size_t i = 0; i < er.rows.size(); ++i) {
    // The expert's rank in this row: RouterTopK's order (weight descending,
    // ties to the lower id).
    int rank = 0;
    for (const RoutingPlan::ExpertRows& other : plan.experts) {
      if (other.expert == er.expert) continue;
      const auto at = std::find(other.rows.begin(), other.rows.end(), er.rows[i]);
      if (at == other.rows.end()) continue;
      const float w = other.weights[static_cast<size_t>(at - other.rows.begin())];
      if (w > er.weights[i] || (w == er.weights[i] && other.expert < er.expert)) ++rank;
    }
    if (rank < t) return false;
  }
  return true;
}

ExpertTaskStats ClusterExpertExecutor::TakeStats() {
  ExpertTaskStats s = stats_;
  stats_ = ExpertTaskStats();
  return s;
}

absl::Status ClusterExpertExecutor::Send(int worker, uint32_t layer, uint32_t expert,
                                         uint32_t position, const float* rows, int64_t n,
                                         uint32_t mini_batch, uint32_t mini_batches,
                                         uint64_t* task_id, ExpertTaskFlags flags) {
  v1::WorkerRequest req;
  v1::ExpertTask* task = req.mutable_task();
  *task_id = next_task_++;
  task->set_task_id(*task_id);
  task->mutable_key()->set_request(request_);
  task->mutable_key()->set_token(token_);
  task->mutable_key()->set_layer(layer);
  task->set_expert(expert);
  task->set_mini_batch(mini_batch);
  task->set_mini_batches(mini_batches);
  task->set_position(position);
  task->set_degradable(flags.degradable);
  task->set_low_precision(flags.low_precision);
  EncodeRows(rows, n, config_.n_embd, ToWire(topology_.wire_dtype), task->mutable_input());
  ++stats_.tasks;
  return links_.SendToWorker(worker, req);
}

absl::Status ClusterExpertExecutor::Receive(uint64_t task_id, int worker, uint32_t layer,
                                            int64_t n, float* rows_out) {
  const auto t0 = std::chrono::steady_clock::now();
  ODMOE_ASSIGN_OR_RETURN(v1::ExpertResult r,
                         links_.TakeResult(task_id, worker,
                                           absl::Milliseconds(topology_.main.worker_timeout_ms)));
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string& wid = topology_.workers[static_cast<size_t>(worker)].id;
  if (r.error_code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(r.error_code()),
                        absl::StrFormat("worker %s: %s", wid, r.error_message()));
  }
  ODMOE_RETURN_IF_ERROR(DecodeRows(r.output(), config_.n_embd, n, &decoded_, "expert output")
                            .status());
  if (static_cast<int64_t>(decoded_.size()) != n * config_.n_embd) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "worker %s returned %d rows for a task of %d", wid,
        decoded_.size() / static_cast<size_t>(config_.n_embd), n));
  }
  std::copy(decoded_.begin(), decoded_.end(), rows_out);
  worker_costs_.Observe(n, r.compute_seconds());
  if (r.low_precision()) ++stats_.low_precision;
  if (token_ > 0) {
    ++(r.computed_on_host() ? stats_.host_computes
       : r.substituted()    ? stats_.substitutions
       : r.prefetched()     ? stats_.hits
                            : stats_.misses);
    if (r.reloaded()) ++stats_.reloads;
    stats_.stall_seconds += r.stall_seconds();
    if (stats_.stall_per_layer.size() < static_cast<size_t>(config_.n_layer)) {
      stats_.stall_per_layer.resize(static_cast<size_t>(config_.n_layer), 0.0);
    }
    stats_.stall_per_layer[layer] += r.stall_seconds();
  }
  return absl::OkStatus();
}

absl::Status ClusterExpertExecutor::Failed(int worker, int layer, const absl::Status& why) {
  if (!absl::IsUnavailable(why) || schedule_ == nullptr) return why;
  const int group = worker / topology_.group_size;
  ++stats_.worker_failures;
  {
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    Quarantine& q = quarantine_[group];
    q.backoff = std::min(q.backoff * 2, std::chrono::milliseconds(60000));
    q.until = std::chrono::steady_clock::now() + q.backoff;
  }
  bool removed = false;
  {
    std::lock_guard<std::mutex> lock(*schedule_mu_);
    removed = schedule_->Remove(group);
  }
  if (removed) {
    ODMOE_LOG_WARN("{}; group {} leaves the schedule (version {}, {} groups left)",
                   why.message(), group, schedule_->version, schedule_->groups.size());
  }
  if (schedule_->empty()) {
    return absl::UnavailableError(absl::StrFormat(
        "no complete worker group is left to compute layer %d (last failure: %s)", layer,
        why.message()));
  }
  return absl::OkStatus();
}

absl::Status ClusterExpertExecutor::Retrying(
    int layer, const std::function<absl::Status(int* failed_worker)>& attempt) {
  while (true) {
    int failed_worker = -1;
    absl::Status s = attempt(&failed_worker);
    if (s.ok() || failed_worker < 0) return s;
    ODMOE_RETURN_IF_ERROR(Failed(failed_worker, layer, s));
  }
}

std::vector<int> ClusterExpertExecutor::LayerGroupMembers(int layer) const {
  return topology_.GroupMembers(schedule_ ? schedule_->GroupOfLayer(layer)
                                          : topology_.GroupOfLayer(layer));
}

std::vector<int> ClusterExpertExecutor::SpreadMembers(int layer) const {
  std::vector<int> groups;
  if (schedule_ != nullptr) {
    groups = schedule_->groups;
  } else {
    for (int g = 0; g < topology_.n_groups(); ++g) groups.push_back(g);
  }
  std::vector<int> members;
  if (groups.empty()) return members;
  const size_t first = static_cast<size_t>(layer) % groups.size();
  for (size_t i = 0; i < groups.size(); ++i) {
    for (int w : topology_.GroupMembers(groups[(first + i) % groups.size()])) {
      members.push_back(w);
    }
  }
  return members;
}

absl::Status ClusterExpertExecutor::RunDecodeOn(int layer, const RoutingPlan& plan,
                                                const std::vector<int>& members,
                                                int* failed_worker) {
  std::vector<int32_t> actual;
  for (const RoutingPlan::ExpertRows& er : plan.experts) actual.push_back(er.expert);
  if (actual.empty() || members.empty()) {
    return absl::InternalError(absl::StrFormat(
        "layer %d chose %d experts for a group of %d workers", layer, actual.size(),
        members.size()));
  }
  const std::vector<int32_t> predicted =
      links_.predictions().Get(request_, token_, static_cast<uint32_t>(layer));
  // Position p goes to worker p mod G of the group; sending in position order
  // gives every worker its tasks in its own position order, and each its
  // first task as early as possible.
  const std::vector<int32_t> assignment = FinalAssignment(predicted, actual);
  // workers.degrade: every expert but the row's top-1 may be substituted.
  int32_t top1 = -1;
  float top1_weight = 0;
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    if (top1 < 0 || er.weights[0] > top1_weight) {
      top1 = er.expert;
      top1_weight = er.weights[0];
    }
  }
  const int g = static_cast<int>(members.size());
  std::vector<uint64_t> ids(assignment.size());
  for (size_t p = 0; p < assignment.size(); ++p) {
    const int worker = members[static_cast<size_t>(WorkerOfPosition(static_cast<int>(p), g))];
    const size_t entry = static_cast<size_t>(
        std::find(actual.begin(), actual.end(), assignment[p]) - actual.begin());
    absl::Status s = Send(worker, static_cast<uint32_t>(layer),
                          static_cast<uint32_t>(assignment[p]), static_cast<uint32_t>(p),
                          host_x_.data(), 1, 0, 1, &ids[p],
                          {.degradable = topology_.degrade && assignment[p] != top1,
                           .low_precision = SubCritical(layer, plan, entry)});
    if (!s.ok()) {
      *failed_worker = worker;
      return s;
    }
  }
  if (lookahead_ && !lookahead_done_) {
    lookahead_done_ = true;
    ODMOE_RETURN_IF_ERROR(lookahead_(layer, decode_x_));
  }
  // Results land by plan entry, whoever computed them: Combine adds them in
  // the canonical order of expert_executor.h.
  for (size_t p = 0; p < assignment.size(); ++p) {
    const int worker = members[static_cast<size_t>(WorkerOfPosition(static_cast<int>(p), g))];
    const size_t entry = static_cast<size_t>(
        std::find(actual.begin(), actual.end(), assignment[p]) - actual.begin());
    host_y_[entry].resize(static_cast<size_t>(config_.n_embd));
    absl::Status s =
        Receive(ids[p], worker, static_cast<uint32_t>(layer), 1, host_y_[entry].data());
    if (!s.ok()) {
      *failed_worker = worker;
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterExpertExecutor::RunPrefillOn(int layer, const RoutingPlan& plan,
                                                 int* failed_worker) {
  struct Pending {
    size_t plan_index;
    int64_t first_row, n;
    int worker;
    uint64_t task_id;
  };
  std::vector<Pending> pending;
  const int64_t d = config_.n_embd;
  const bool automatic = topology_.prefill_mini_batch == Topology::kAutoMiniBatch;
  int64_t messages = 0;  // auto: per expert, chosen for the layer's experts' mean rows
  if (automatic) {
    int64_t routed = 0;
    for (const RoutingPlan::ExpertRows& er : plan.experts) {
      routed += static_cast<int64_t>(er.rows.size());
    }
    const int experts = static_cast<int>(plan.experts.size());
    messages = AutoMessagesPerExpert(experts, experts > 0 ? (routed + experts - 1) / experts : 1);
  }
  const int64_t max_rows = topology_.max_task_rows();
  for (size_t p = 0; p < plan.experts.size(); ++p) {
    const RoutingPlan::ExpertRows& er = plan.experts[p];
    const int worker = schedule_ ? schedule_->PrefillWorkerOfExpert(er.expert)
                                 : topology_.PrefillWorkerOfExpert(er.expert);
    const int64_t n = static_cast<int64_t>(er.rows.size());
    host_y_[p].resize(static_cast<size_t>(n * d));
    const int64_t split = std::min(messages, n);
    const int64_t b = automatic ? std::min(max_rows, (n + split - 1) / split)
                                : topology_.prefill_mini_batch;
    const uint32_t batches = static_cast<uint32_t>((n + b - 1) / b);
    for (uint32_t c = 0; c < batches; ++c) {
      const int64_t first = c * b;
      const int64_t count = std::min(b, n - first);
      uint64_t id = 0;
      absl::Status s = SendGathered(worker, static_cast<uint32_t>(layer), plan, p,
                                    /*position=*/0, c, batches, first, count, &id);
      if (!s.ok()) {
        *failed_worker = worker;
        return s;
      }
      pending.push_back({p, first, count, worker, id});
    }
  }
  for (const Pending& p : pending) {
    absl::Status s = Receive(p.task_id, p.worker, static_cast<uint32_t>(layer), p.n,
                             host_y_[p.plan_index].data() + p.first_row * d);
    if (!s.ok()) {
      *failed_worker = p.worker;
      return s;
    }
  }
  return absl::OkStatus();
}

int64_t ClusterExpertExecutor::AutoMessagesPerExpert(int experts, int64_t rows) {
  const int64_t max_rows = topology_.max_task_rows();
  PrefillCosts c;
  c.message_s = static_cast<double>(topology_.prefill_message_cost_us) * 1e-6;
  c.row_bytes = static_cast<double>(config_.n_embd) *
                (topology_.wire_dtype == WireDType::kF16 ? 2.0 : 4.0);
  c.link_bytes_per_s = static_cast<double>(topology_.link_bandwidth);
  c.call_s = worker_costs_.call_s();
  c.row_s = worker_costs_.row_s();
  const int64_t messages = ChooseMessagesPerExpert(experts, rows, max_rows, c);
  if (messages != last_messages_) {
    // Operators see what auto chose (and why) whenever it changes.
    ODMOE_LOG_INFO(
        "prefill.mini_batch auto: {} message(s) per expert ({} experts of {} rows; a worker's "
        "call {:.3f} ms + {:.3f} ms per row, link {})",
        messages, experts, rows, c.call_s * 1e3, c.row_s * 1e3,
        c.link_bytes_per_s > 0 ? absl::StrFormat("%.0f MB/s", c.link_bytes_per_s / 1e6)
                               : std::string("unlimited"));
    last_messages_ = messages;
  }
  return messages;
}

absl::Status ClusterExpertExecutor::SendGathered(int worker, uint32_t layer,
                                                 const RoutingPlan& plan, size_t p,
                                                 uint32_t position, uint32_t mini_batch,
                                                 uint32_t mini_batches, int64_t first,
                                                 int64_t count, uint64_t* task_id) {
  const int64_t d = config_.n_embd;
  const RoutingPlan::ExpertRows& er = plan.experts[p];
  for (int64_t i = 0; i < count; ++i) {
    std::copy_n(host_x_.data() + er.rows[static_cast<size_t>(first + i)] * d, d,
                host_gather_.data() + i * d);
  }
  return Send(worker, layer, static_cast<uint32_t>(er.expert), position, host_gather_.data(),
              count, mini_batch, mini_batches, task_id,
              {.low_precision = SubCritical(static_cast<int>(layer), plan, p)});
}

absl::Status ClusterExpertExecutor::RunVerifyOn(int layer, const RoutingPlan& plan,
                                                const std::vector<int>& members,
                                                int* failed_worker) {
  if (plan.experts.empty() || members.empty()) {
    return absl::InternalError(absl::StrFormat(
        "layer %d chose %d experts for a group of %d workers", layer, plan.experts.size(),
        members.size()));
  }
  std::vector<int32_t> experts;
  for (const RoutingPlan::ExpertRows& er : plan.experts) experts.push_back(er.expert);
  const std::vector<int32_t> predicted =
      !shared_step_ ? links_.predictions().Get(request_, token_, static_cast<uint32_t>(layer))
      : StepPredicted(layer) ? step_predictions_[static_cast<size_t>(layer)]
                             : std::vector<int32_t>{};
  const std::vector<int> positions =
      SpreadAssignment(predicted, experts, static_cast<int>(members.size()), config_.n_expert_used);
  // The predicted experts first: each worker computes its prefetched one
  // before a miss could take that slot.
  std::vector<size_t> order(experts.size());
  for (size_t p = 0; p < order.size(); ++p) order[p] = p;
  std::stable_partition(order.begin(), order.end(), [&](size_t p) {
    return std::find(predicted.begin(), predicted.end(), experts[p]) != predicted.end();
  });
  const int64_t d = config_.n_embd;
  struct Sent {
    size_t entry;
    int worker;
    uint64_t task_id;
  };
  std::vector<Sent> sent;
  for (size_t p : order) {
    const int worker = members[static_cast<size_t>(
        WorkerOfPosition(positions[p], static_cast<int>(members.size())))];
    const int64_t n = static_cast<int64_t>(plan.experts[p].rows.size());
    host_y_[p].resize(static_cast<size_t>(n * d));
    uint64_t id = 0;
    absl::Status s = SendGathered(worker, static_cast<uint32_t>(layer), plan, p,
                                  static_cast<uint32_t>(positions[p]), 0, 1, 0, n, &id);
    if (!s.ok()) {
      *failed_worker = worker;
      return s;
    }
    sent.push_back({p, worker, id});
  }
  if (lookahead_ && !lookahead_done_) {
    lookahead_done_ = true;
    ODMOE_RETURN_IF_ERROR(lookahead_(layer, decode_x_));
  }
  for (const Sent& t : sent) {
    absl::Status s = Receive(t.task_id, t.worker, static_cast<uint32_t>(layer),
                             static_cast<int64_t>(plan.experts[t.entry].rows.size()),
                             host_y_[t.entry].data());
    if (!s.ok()) {
      *failed_worker = t.worker;
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterExpertExecutor::Combine(const RoutingPlan& plan, Mat out) {
  const int64_t d = config_.n_embd;
  ODMOE_RETURN_IF_ERROR(
      backend_.CopyToBackend(out.data, zeros_.data(), out.rows * out.cols * sizeof(float)));
  for (size_t p = 0; p < plan.experts.size(); ++p) {
    const RoutingPlan::ExpertRows& er = plan.experts[p];
    const int64_t n = static_cast<int64_t>(er.rows.size());
    ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(idx_, er.rows.data(), n * sizeof(int32_t)));
    ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(scale_, er.weights.data(), n * sizeof(float)));
    ODMOE_RETURN_IF_ERROR(backend_.CopyToBackend(ye_, host_y_[p].data(), n * d * sizeof(float)));
    backend_.ScatterAddScaled(Mat{ye_, n, d}, idx_, scale_, out);
  }
  return absl::OkStatus();
}

void ClusterExpertExecutor::SetStep(uint64_t request, uint32_t token) {
  if (trace_ && trace_->enabled()) {
    const int64_t now = TraceRecorder::NowUs();
    // What the main node did after the previous step's last layer: final norm,
    // LM head, sampling, alignment.
    if (last_layer_ >= 0 && mark_us_ > 0) {
      trace_->Record(TraceEvent{"head", "compute", mark_us_, now - mark_us_, request_, token_,
                                -1, -1});
    }
    mark_us_ = now;
  }
  request_ = request;
  token_ = token;
  last_layer_ = -1;
  step_predictions_.clear();
  shared_step_ = false;
  before_layer_ = nullptr;
}

absl::Status ClusterExpertExecutor::Run(int layer, ConstMat x, const RoutingPlan& plan, Mat out) {
  const bool tracing = trace_ && trace_->enabled();
  int64_t experts_start = 0;
  if (tracing) {
    experts_start = TraceRecorder::NowUs();
    if (mark_us_ > 0) {
      trace_->Record(TraceEvent{"M", "compute", mark_us_, experts_start - mark_us_, request_,
                                token_, layer, -1});
    }
  }
  absl::Status s = RunExperts(layer, x, plan, out);
  if (tracing) {
    mark_us_ = TraceRecorder::NowUs();
    trace_->Record(TraceEvent{"experts", "wait", experts_start, mark_us_ - experts_start,
                              request_, token_, layer, -1});
  }
  last_layer_ = layer;
  return s;
}

absl::Status ClusterExpertExecutor::RunExperts(int layer, ConstMat x, const RoutingPlan& plan,
                                               Mat out) {
  if (x.rows > max_rows_ || x.cols != config_.n_embd || out.rows != x.rows ||
      out.cols != x.cols) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "expert batch of %d x %d does not fit the executor (%d x %d)", x.rows, x.cols, max_rows_,
        config_.n_embd));
  }
  ODMOE_RETURN_IF_ERROR(
      backend_.CopyToHost(host_x_.data(), x.data, x.rows * x.cols * sizeof(float)));
  if (host_y_.size() < plan.experts.size()) host_y_.resize(plan.experts.size());
  // Every row's experts (ascending ids), for recall.
  std::vector<std::vector<int32_t>>& per_row = actual_[static_cast<size_t>(layer)];
  per_row.assign(static_cast<size_t>(x.rows), {});
  for (const RoutingPlan::ExpertRows& er : plan.experts) {
    for (int32_t r : er.rows) per_row[static_cast<size_t>(r)].push_back(er.expert);
  }
  if (before_layer_) before_layer_(layer);
  decode_x_ = x;
  lookahead_done_ = false;
  if (token_ > 0 && x.rows > 1) {
    ODMOE_RETURN_IF_ERROR(Retrying(layer, [&](int* failed_worker) {
      return RunVerifyOn(layer, plan,
                         shared_step_ ? SpreadMembers(layer) : LayerGroupMembers(layer),
                         failed_worker);
    }));
  } else if (token_ > 0) {
    ODMOE_RETURN_IF_ERROR(Retrying(layer, [&](int* failed_worker) {
      return RunDecodeOn(layer, plan, LayerGroupMembers(layer), failed_worker);
    }));
  } else {
    ODMOE_RETURN_IF_ERROR(Retrying(
        layer, [&](int* failed_worker) { return RunPrefillOn(layer, plan, failed_worker); }));
  }
  return Combine(plan, out);
}

}  // namespace odmoe
