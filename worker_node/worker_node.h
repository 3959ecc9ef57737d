// odmoe-worker as a library: a WorkerCore (worker_core.h) behind the Worker
// gRPC service, with the model's experts in host memory (the mmapped GGUF)
// and one compute backend whose memory is the expert budget.
//
//   ODMOE_ASSIGN_OR_RETURN(Topology t, LoadTopology("deploy/testbed-10.yaml"));
//   ODMOE_ASSIGN_OR_RETURN(auto worker, WorkerNode::Create(t, "w3"));
//   // serve worker->services() (NodeServer), then worker->Start()
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cluster/node_daemon.h"
#include "model/model_file.h"
#include "topology/topology.h"
#include "worker_node/worker_core.h"

namespace odmoe {

class WorkerService;

class WorkerNode : public NodeDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(const Topology& topology,
                                                            const std::string& node_id);
  ~WorkerNode() override;

  v1::Role role() const override { return v1::ROLE_WORKER; }
  const std::string& node_id() const override { return id_; }
  uint64_t model_fingerprint() const override { return model_->fingerprint(); }
  std::vector<grpc::Service*> services() override;
  absl::Status Start() override;
  void Shutdown() override;
  void FillWelcome(v1::Welcome* welcome) const override;
  void FillStatus(v1::NodeStatus* status) const override;
  /// Its largest message: a task of a prefill mini-batch of hidden rows
  /// (n_embd f32 values each) with 1 MiB for the framing and hints.
  size_t max_receive_message_bytes() const override;

  WorkerCore& core() { return *core_; }

 private:
  WorkerNode() = default;

  std::string id_;
  int max_task_rows_ = 1;  // the topology's prefill mini-batch
  std::unique_ptr<ModelFile> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> host_backend_;  // workers.host_compute on a device backend
  std::unique_ptr<ModelFile> low_model_;   // workers.mixed_precision's copy
  std::unique_ptr<WorkerCore> core_;
  std::unique_ptr<WorkerService> service_;
};

}  // namespace odmoe
