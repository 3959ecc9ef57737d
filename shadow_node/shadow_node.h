// odmoe-shadow as a library: the shadow's quantized model (ShadowCore) behind
// the Shadow gRPC service, plus a hint stream to every worker.
//
// The quantized copy comes from the topology: shadow.model (a file made with
// odmoe-quantize, whose odmoe.source_fingerprint must match the main model)
// or, by default, the main model quantized to shadow.quantization at start-up
// and cached next to the system's temporary files
// (<cache>/odmoe-shadow-<fingerprint>-<type>.gguf).
//
// Start() prepares that copy in the background (quantizing it if needed:
// Node.Status then says "starting: quantizing 37 %", and handshakes are
// refused with that state so the main node retries), then dials every worker.
//
//   ODMOE_ASSIGN_OR_RETURN(auto shadow, ShadowNode::Create(topology, "shadow"));
//   // serve shadow->services() (NodeServer), then shadow->Start(): it prepares
//   // the model, dials every worker (handshake + Hints stream), reports ready.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "cluster/node_daemon.h"
#include "model/model_file.h"
#include "shadow_node/shadow_core.h"
#include "topology/topology.h"

namespace odmoe {

class ShadowService;

class ShadowNode : public NodeDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<ShadowNode>> Create(const Topology& topology,
                                                            const std::string& node_id);
  ~ShadowNode() override;

  v1::Role role() const override { return v1::ROLE_SHADOW; }
  const std::string& node_id() const override { return id_; }
  uint64_t model_fingerprint() const override { return base_fingerprint_; }
  std::vector<grpc::Service*> services() override;
  absl::Status Start() override;
  void Shutdown() override;
  void FillStatus(v1::NodeStatus* status) const override;
  /// UNAVAILABLE ("starting: quantizing 37 %") until the quantized copy is
  /// loaded: handshakes wait for it.
  absl::Status ReadyForPeers() const override;
  /// Its largest message: a KV alignment chunk (kKvChunkBytes of K plus V,
  /// doubled for a chunk's one-row minimum) or a prompt of the largest
  /// context (2^20 token ids), with room for the framing.
  size_t max_receive_message_bytes() const override {
    return 2 * kKvChunkBytes + (8u << 20);
  }

 private:
  ShadowNode() = default;
  /// The quantized copy: made (or found in the cache), opened, its core built.
  absl::Status PrepareCore();

  std::string id_;
  Topology topology_;
  uint64_t base_fingerprint_ = 0;
  std::string model_path_;
  std::unique_ptr<ModelFile> model_;  // the quantized copy
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ShadowCore> core_;
  std::unique_ptr<ShadowService> service_;
  std::atomic<bool> core_ready_{false};  // model_ and core_ are set (release/acquire)
  std::atomic<bool> cancel_{false};
  std::thread connector_;
};

/// The quantized copy the shadow of `topology` runs: opens shadow.model or
/// makes (and caches) the quantized file. Exposed for tests and tools.
/// `on_progress` hears the fraction of the quantization done; `cancel`
/// stops it (CANCELLED, nothing cached).
absl::StatusOr<std::string> PrepareShadowModel(
    const Topology& topology, uint64_t base_fingerprint,
    const std::function<void(double fraction)>& on_progress = {},
    const std::atomic<bool>* cancel = nullptr);

}  // namespace odmoe
