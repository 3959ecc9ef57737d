#include "shadow_node/shadow_node.h"

#include <algorithm>
#include <functional>



#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "cluster/protocol.h"
#include "model/model_quantizer.h"
#include "model/quantized_copy.h"
#include "shadow_node/shadow_service.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {
namespace {

absl::Status CheckSource(const ModelFile& m, const std::string& path, uint64_t base) {
  if (SourceFingerprint(m) != base) {
    return absl::FailedPreconditionError(
        absl::StrFormat("shadow model %s was made from model %s, but the cluster's model is %s",
                        path, FingerprintHex(SourceFingerprint(m)), FingerprintHex(base)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> PrepareShadowModel(const Topology& topology,
                                               uint64_t base_fingerprint,
                                               const std::function<void(double)>& on_progress,
                                               const std::atomic<bool>* cancel) {
  const ShadowSpec& spec = *topology.shadow;
  if (!spec.model.empty()) {
    ODMOE_ASSIGN_OR_RETURN(auto m, ModelFile::Open(spec.model));
    ODMOE_RETURN_IF_ERROR(CheckSource(*m, spec.model, base_fingerprint));
    return spec.model;
  }
  return CachedQuantizedCopy(topology.model, base_fingerprint, spec.quantization, "shadow",
                             "the shadow", on_progress, cancel);
}

absl::StatusOr<std::unique_ptr<ShadowNode>> ShadowNode::Create(const Topology& topology,
                                                               const std::string& node_id) {
  if (!topology.shadow || topology.shadow->id != node_id) {
    return absl::NotFoundError(
        absl::StrFormat("%s: no shadow node with id '%s'", topology.path, node_id));
  }
  std::unique_ptr<ShadowNode> s(new ShadowNode());
  s->id_ = node_id;
  ODMOE_ASSIGN_OR_RETURN(auto auth, PeerAuth::ForNode(topology, PeerRole::kShadow, node_id));
  s->SetPeerAuth(std::move(auth));
  s->topology_ = topology;
  {
    ODMOE_ASSIGN_OR_RETURN(auto base, ModelFile::Open(topology.model));
    s->base_fingerprint_ = base->fingerprint();
  }
  // The backend is made now, so a bad backend name fails the start at once;
  // the quantized copy is prepared by Start() in the background, with its
  // progress in Node.Status, and Follow streams wait for it.
  ODMOE_ASSIGN_OR_RETURN(s->backend_, CreateBackend(topology.shadow->backend));
  s->service_ = std::make_unique<ShadowService>(s->topology_, node_id, s->base_fingerprint_,
                                                *s->peer_auth());
  return s;
}

absl::Status ShadowNode::PrepareCore() {
  const Topology& topology = topology_;
  auto progress = [this](double fraction) {
    SetState(v1::NODE_STATE_STARTING,
             absl::StrFormat("quantizing %.0f %%", 100.0 * std::min(1.0, fraction)));
  };
  ODMOE_ASSIGN_OR_RETURN(model_path_,
                         PrepareShadowModel(topology, base_fingerprint_, progress, &cancel_));
  ODMOE_ASSIGN_OR_RETURN(model_, ModelFile::Open(model_path_));
  Transformer::Options topt;
  topt.n_ctx = topology.main.context;
  topt.n_batch = topology.main.batch;
  topt.n_seq = topology.main.max_running;  // it follows every running request
  ShadowCore::Options opt;
  opt.n_groups = topology.n_groups();
  opt.max_run_ahead = topology.shadow->max_run_ahead;
  opt.trace = &trace();
  ODMOE_ASSIGN_OR_RETURN(core_, ShadowCore::Create(*model_, *backend_, topt, opt));
  service_->AttachCore(core_.get());
  core_ready_.store(true, std::memory_order_release);
  ODMOE_LOG_INFO("shadow model {} ({}), backend {}, {} worker groups", model_path_,
                 GgmlTypeName(static_cast<uint32_t>(topology.shadow->quantization)),
                 backend_->name(), opt.n_groups);
  return absl::OkStatus();
}

absl::Status ShadowNode::ReadyForPeers() const {
  if (core_ready_.load(std::memory_order_acquire)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("starting: ", state_detail()));
}

ShadowNode::~ShadowNode() { Shutdown(); }

std::vector<grpc::Service*> ShadowNode::services() { return {service_->grpc_service()}; }

absl::Status ShadowNode::Start() {
  SetState(v1::NODE_STATE_STARTING, "preparing the shadow model");
  connector_ = std::thread([this] {
    absl::Status s = PrepareCore();
    if (!s.ok()) {
      if (!cancel_.load()) {
        ODMOE_LOG_ERROR("{}", s.message());
        SetState(v1::NODE_STATE_FAILED, std::string(s.message()));
      }
      return;
    }
    SetState(v1::NODE_STATE_STARTING, "connecting to the workers");
    s = service_->ConnectWorkers(cancel_);
    if (s.ok()) {
      ODMOE_LOG_INFO("hint streams open to {} workers; ready", topology_.n_workers());
      service_->StartRejoin();
      SetState(v1::NODE_STATE_READY);
    } else if (!cancel_.load()) {
      ODMOE_LOG_ERROR("{}", s.message());
      SetState(v1::NODE_STATE_FAILED, std::string(s.message()));
    }
  });
  return absl::OkStatus();
}

void ShadowNode::Shutdown() {
  if (cancel_.exchange(true)) return;
  SetState(v1::NODE_STATE_DRAINING, "shutting down");
  if (connector_.joinable()) connector_.join();  // a quantization in progress is cancelled
  if (core_ready_.load()) core_->Stop();
  if (service_) service_->Close();
}

void ShadowNode::FillStatus(v1::NodeStatus* status) const {
  auto add = [status](const std::string& k, const std::string& v) { AddStatusEntry(status, k, v); };
  if (!core_ready_.load(std::memory_order_acquire)) {  // still preparing (state detail says how far)
    add("quantization",
        std::string(GgmlTypeName(static_cast<uint32_t>(topology_.shadow->quantization))));
    return;
  }
  const ShadowStats s = core_->stats();
  add("model", model_path_);
  add("quantization",
      std::string(GgmlTypeName(static_cast<uint32_t>(topology_.shadow->quantization))));
  add("requests", absl::StrCat(s.requests));
  add("requests_finished", absl::StrCat(s.requests_finished));
  add("iterations", absl::StrCat(s.iterations));
  add("iterations_skipped", absl::StrCat(s.iterations_skipped));
  add("speculation_misses", absl::StrCat(s.speculation_misses));
  add("recurrent_resyncs", absl::StrCat(s.recurrent_resyncs));
  add("recurrent_rows_replayed", absl::StrCat(s.recurrent_rows_replayed));
  add("predictions", absl::StrCat(s.predictions));
  add("drafts", absl::StrCat(s.drafts));
  add("hints_sent", absl::StrCat(service_->hints_sent()));
  add("hint_failures", absl::StrCat(service_->hint_failures()));
  add("token_alignments", absl::StrCat(s.token_alignments));
  add("kv_alignments", absl::StrCat(s.kv_alignments));
  add("kv_rows_aligned", absl::StrCat(s.kv_rows_aligned));
  add("alignment_seconds", absl::StrFormat("%.6f", s.alignment_seconds));
  add("forward_seconds", absl::StrFormat("%.6f", s.forward_seconds));
  add("wait_seconds", absl::StrFormat("%.6f", s.wait_seconds));
  add("rejected_messages", absl::StrCat(s.rejected_messages));
}

}  // namespace odmoe
