#include "main_node/main_node.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "main_node/main_service.h"
#include "util/logging.h"
#include "util/status_macros.h"

namespace odmoe {

absl::StatusOr<std::unique_ptr<MainNode>> MainNode::Create(const Topology& topology,
                                                           const std::string& node_id) {
  if (topology.main.id != node_id) {
    return absl::NotFoundError(
        absl::StrFormat("%s: the main node's id is '%s', not '%s'", topology.path,
                        topology.main.id, node_id));
  }
  std::unique_ptr<MainNode> m(new MainNode());
  m->id_ = node_id;
  m->topology_ = topology;
  ODMOE_ASSIGN_OR_RETURN(m->model_, ModelFile::Open(topology.model));
  ODMOE_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::FromGguf(m->model_->gguf()));
  if (m->tokenizer_->n_vocab() != m->model_->config().n_vocab) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tokenizer has %d tokens but token_embd has %d rows", topology.model,
        m->tokenizer_->n_vocab(), m->model_->config().n_vocab));
  }
  ODMOE_ASSIGN_OR_RETURN(m->backend_, CreateBackend(topology.main.backend));
  m->links_ = ClusterLinks::Create(m->topology_, m->model_->config(), node_id,
                                   m->model_->fingerprint());
  ODMOE_ASSIGN_OR_RETURN(m->engine_, MainEngine::Create(m->topology_, *m->model_,
                                                        *m->tokenizer_, *m->backend_,
                                                        *m->links_));
  m->service_ = std::make_unique<MainService>(*m);
  ODMOE_LOG_INFO("main: {} workers in {} groups of {}, prediction {}, backend {}",
                 topology.n_workers(), topology.n_groups(), topology.group_size,
                 PredictionModeName(topology.prediction), m->backend_->name());
  return m;
}

MainNode::~MainNode() { Shutdown(); }

std::vector<grpc::Service*> MainNode::services() { return {service_->grpc_service()}; }

absl::Status MainNode::Start() {
  SetState(v1::NODE_STATE_STARTING, "connecting to the workers and the shadow");
  connector_ = std::thread([this] {
    absl::Status s = links_->Connect(cancel_);
    if (s.ok()) {
      ODMOE_LOG_INFO("cluster connected; ready");
      SetState(v1::NODE_STATE_READY);
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
  if (connector_.joinable()) connector_.join();
  if (links_) links_->Close();
}

absl::StatusOr<ClusterGenerateResult> MainNode::Generate(const GenerateRequest& request,
                                                         const GenerationCallback& on_token,
                                                         const std::function<bool()>& cancelled) {
  if (state() != v1::NODE_STATE_READY) {
    return absl::UnavailableError(
        absl::StrFormat("the cluster cannot serve yet (%s): %s",
                        NodeStateName(state()), state_detail()));
  }
  absl::StatusOr<ClusterGenerateResult> r = engine_->Generate(request, on_token, cancelled);
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++requests_;
  if (!r.ok()) {
    ++failures_;
    return r;
  }
  tokens_ += r->result.output_ids.size();
  last_recall_ = r->recall.overall;
  last_decode_tps_ = r->result.stats.decode_tokens_per_second();
  return r;
}

void MainNode::FillStatus(v1::NodeStatus* status) const {
  auto add = [status](const std::string& k, const std::string& v) {
    AddStatusEntry(status, k, v);
  };
  add("workers", absl::StrFormat("%d in %d groups of %d", topology_.n_workers(),
                                 topology_.n_groups(), topology_.group_size));
  add("prediction", std::string(PredictionModeName(topology_.prediction)));
  add("shadow_connected", links_->shadow_connected() ? "yes" : "no");
  std::lock_guard<std::mutex> lock(stats_mu_);
  add("requests", absl::StrCat(requests_));
  add("failures", absl::StrCat(failures_));
  add("generated_tokens", absl::StrCat(tokens_));
  add("last_recall", absl::StrFormat("%.4f", last_recall_));
  add("last_decode_tokens_per_second", absl::StrFormat("%.1f", last_decode_tps_));
}

}  // namespace odmoe
