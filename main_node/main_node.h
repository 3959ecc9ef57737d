// odmoe-main as a library: the model's dense part (embeddings, attention and
// its KV cache, norms, gates, LM head) and sampling (MainEngine), the links to
// the workers and the shadow (ClusterLinks), and the Main gRPC service that
// takes completion requests.
//
//   ODMOE_ASSIGN_OR_RETURN(auto main, MainNode::Create(topology, "main"));
//   // serve main->services() (NodeServer), then main->Start(): it dials every
//   // worker and the shadow in the background and reports ready when done.
//   ODMOE_ASSIGN_OR_RETURN(ClusterGenerateResult r, main->Generate(req, nullptr));
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cluster/node_daemon.h"
#include "main_node/cluster_links.h"
#include "main_node/main_engine.h"
#include "model/model_file.h"
#include "tokenizer/tokenizer.h"
#include "topology/topology.h"

namespace odmoe {

class MainService;

class MainNode : public NodeDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<MainNode>> Create(const Topology& topology,
                                                          const std::string& node_id);
  ~MainNode() override;

  v1::Role role() const override { return v1::ROLE_MAIN; }
  const std::string& node_id() const override { return id_; }
  uint64_t model_fingerprint() const override { return model_->fingerprint(); }
  std::vector<grpc::Service*> services() override;
  absl::Status Start() override;
  void Shutdown() override;
  void FillStatus(v1::NodeStatus* status) const override;

  /// UNAVAILABLE until the cluster is connected (or while draining).
  absl::StatusOr<ClusterGenerateResult> Generate(const GenerateRequest& request,
                                                 const GenerationCallback& on_token,
                                                 const std::function<bool()>& cancelled = {});
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  MainNode() = default;
  void Record(const ClusterGenerateResult& r);

  std::string id_;
  Topology topology_;
  std::unique_ptr<ModelFile> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ClusterLinks> links_;
  std::unique_ptr<MainEngine> engine_;
  std::unique_ptr<MainService> service_;
  std::atomic<bool> cancel_{false};
  std::thread connector_;

  mutable std::mutex stats_mu_;
  uint64_t requests_ = 0, failures_ = 0, tokens_ = 0;
  double last_recall_ = 0, last_decode_tps_ = 0;
};

}  // namespace odmoe
