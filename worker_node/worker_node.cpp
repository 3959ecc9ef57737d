#include "worker_node/worker_node.h"

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "model/model_quantizer.h"
#include "model/quantized_copy.h"
#include "util/logging.h"
#include "util/status_macros.h"
#include "worker_node/worker_service.h"

namespace odmoe {

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Create(const Topology& topology,
                                                               const std::string& node_id) {
  const int index = topology.WorkerIndex(node_id);
  if (index < 0) {
    return absl::NotFoundError(absl::StrFormat("%s: no worker with id '%s'", topology.path,
                                               node_id));
  }
  const WorkerSpec& spec = topology.workers[static_cast<size_t>(index)];
  std::unique_ptr<WorkerNode> w(new WorkerNode());
  w->id_ = node_id;
  ODMOE_ASSIGN_OR_RETURN(auto auth, PeerAuth::ForNode(topology, PeerRole::kWorker, node_id));
  w->SetPeerAuth(std::move(auth));
  ODMOE_ASSIGN_OR_RETURN(w->model_, ModelFile::Open(topology.model));
  ODMOE_ASSIGN_OR_RETURN(w->backend_, CreateBackend(spec.backend));
  WorkerCore::Options opt;
  opt.placement.worker_index = index;
  opt.placement.n_workers = topology.n_workers();
  opt.placement.group_size = topology.group_size;
  opt.mode = topology.worker_mode;
  opt.utility = {.window = topology.utility.window,
                 .levels = topology.utility.levels,
                 .threshold = topology.utility.threshold};
  opt.cache_experts = topology.cache_experts;
  opt.max_rows = topology.max_task_rows();
  w->max_task_rows_ = topology.max_task_rows();
  opt.memory_budget = spec.memory_budget;
  opt.load_bandwidth = spec.load_bandwidth;
  opt.host_compute = topology.host_compute;
  opt.host_compute_slowdown = topology.host_compute_slowdown;
  opt.sub_expert = topology.sub_expert;
  if (topology.mixed_precision) {
    // DyMoE: the sub-critical experts come from a copy in the low type,
    // made once per machine (cached beside the shadow's).
    ODMOE_ASSIGN_OR_RETURN(
        const std::string low,
        CachedQuantizedCopy(topology.model, SourceFingerprint(*w->model_),
                            topology.mixed_precision->type, "experts", "low-precision experts"));
    ODMOE_ASSIGN_OR_RETURN(w->low_model_, ModelFile::Open(low));
    opt.low_model = w->low_model_.get();
    opt.mixed_floor = topology.mixed_precision->floor;
  }
  opt.trace = &w->trace();
  if (opt.host_compute && !absl::StartsWith(w->backend_->name(), "cpu")) {
    // DAOP's compute on a miss runs on this machine's CPU.
    ODMOE_ASSIGN_OR_RETURN(w->host_backend_, CreateBackend("cpu"));
    opt.host_backend = w->host_backend_.get();
  }
  ODMOE_ASSIGN_OR_RETURN(w->core_, WorkerCore::Create(*w->model_, *w->backend_, opt));
  w->service_ = std::make_unique<WorkerService>(*w->core_, *w->peer_auth(),
                                               absl::Microseconds(topology.wire_delay_us));
  const WorkerStats s = w->core_->stats();
  ODMOE_LOG_INFO(
      "worker {} of {} (group {}, slot {} of {}: {} expert(s) of each of its layers), {} mode, "
      "budget {} bytes: {} slot(s) of {} bytes + {} bytes workspace, backend {}{}",
      index, topology.n_workers(), opt.placement.group(), opt.placement.index_in_group(),
      opt.placement.group_size,
      opt.placement.positions(w->model_->config().n_expert_used).size(),
      std::string(WorkerModeName(topology.worker_mode)), s.memory_budget, s.slots,
      s.expert_bytes, s.workspace_bytes, w->backend_->name(),
      opt.load_bandwidth > 0
          ? absl::StrFormat(", loads EMULATED at %.3f GB/s", opt.load_bandwidth / 1e9)
          : std::string());
  return w;
}

WorkerNode::~WorkerNode() { Shutdown(); }

std::vector<grpc::Service*> WorkerNode::services() { return {service_->grpc_service()}; }

absl::Status WorkerNode::Start() {
  // A worker has no peers to dial: main and shadow connect to it.
  SetState(v1::NODE_STATE_READY);
  return absl::OkStatus();
}

void WorkerNode::Shutdown() {
  if (state() == v1::NODE_STATE_DRAINING) return;
  SetState(v1::NODE_STATE_DRAINING, "shutting down");
  if (core_) core_->Stop();
  if (service_) service_->CancelStreams();
}

void WorkerNode::FillWelcome(v1::Welcome* welcome) const {
  const WorkerPlacement& p = core_->placement();
  const WorkerStats s = core_->stats();
  v1::WorkerInfo* info = welcome->mutable_worker();
  info->set_worker_index(p.worker_index);
  info->set_group(p.group());
  info->set_index_in_group(p.index_in_group());
  info->set_memory_budget_bytes(s.memory_budget);
  info->set_expert_bytes(s.expert_bytes);
  info->set_slots(s.slots);
  info->set_resident(core_->mode() == WorkerMode::kResident);
}

void WorkerNode::FillStatus(v1::NodeStatus* status) const {
  const WorkerStats s = core_->stats();
  const WorkerPlacement& p = core_->placement();
  v1::WorkerStats* w = status->mutable_worker();
  w->set_group(p.group());
  w->set_index_in_group(p.index_in_group());
  w->set_group_size(p.group_size);
  w->set_experts_per_layer(
      static_cast<int32_t>(p.positions(core_->model().config().n_expert_used).size()));
  // The mode's wire number (its row, topology/worker_mode.cpp).
  w->set_mode(static_cast<v1::WorkerMemoryMode>(core_->mode().info().wire));
  w->set_load_bandwidth_bytes_per_second(s.load_bandwidth);
  w->set_memory_budget_bytes(s.memory_budget);
  w->set_expert_bytes(s.expert_bytes);
  w->set_slots(s.slots);
  w->set_experts_held(s.held);
  w->set_experts_held_peak(s.peak_held);
  w->set_memory_peak_bytes(s.peak_bytes);
  w->set_tasks(s.tasks);
  w->set_task_errors(s.task_errors);
  w->set_hits(s.hits);
  w->set_misses(s.misses);
  w->set_reloads(s.reloads);
  w->set_step_experts_peak(s.step_experts_peak);
  w->set_loads(s.loads);
  w->set_bytes_loaded(s.bytes_loaded);
  w->set_load_seconds(s.load_seconds);
  w->set_compute_seconds(s.compute_seconds);
  w->set_stall_seconds(s.stall_seconds);
  w->set_hints_received(s.hints_received);
  w->set_hints_rejected(s.hints_rejected);
  w->set_hints_stale(s.hints_stale);
  w->set_host_computes(s.host_computes);
  w->set_admissions(s.admissions);
  w->set_substitutions(s.substitutions);
}

size_t WorkerNode::max_receive_message_bytes() const {
  const size_t rows = static_cast<size_t>(max_task_rows_);
  const size_t n_embd = static_cast<size_t>(model_->config().n_embd);
  return rows * n_embd * sizeof(float) + (1u << 20);
}

}  // namespace odmoe
