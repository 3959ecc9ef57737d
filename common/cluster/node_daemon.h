// What every odmoe daemon is to the code that runs it: a set of gRPC services,
// a start (connecting to its peers, in the background), a lifecycle state,
// status counters, and a graceful stop. RunDaemon (daemon_main.h) drives it
// for the executables; tests drive it in-process through NodeServer.
//
//   ODMOE_ASSIGN_OR_RETURN(auto worker, WorkerNode::Create(topology, "w0"));
//   ODMOE_ASSIGN_OR_RETURN(auto server, NodeServer::Start("127.0.0.1:0", *worker));
//   ODMOE_RETURN_IF_ERROR(worker->Start());
//   ... worker->state() == v1::NODE_STATE_READY ...
//   worker->Shutdown();  server->Shutdown(absl::Seconds(2));
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cluster/peer_auth.h"
#include "cluster/protocol.h"
#include "cluster/trace.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace odmoe {

class NodeDaemon {
 public:
  virtual ~NodeDaemon() = default;

  virtual v1::Role role() const = 0;
  virtual const std::string& node_id() const = 0;
  /// Fingerprint of the base model this node serves (handshakes compare it).
  virtual uint64_t model_fingerprint() const = 0;

  /// The services to register, Node included. Valid for the daemon's lifetime.
  virtual std::vector<grpc::Service*> services() = 0;

  /// Called once the server listens. Returns quickly; connecting to peers
  /// happens in the background (state() says when it is done).
  virtual absl::Status Start() = 0;

  /// Stops accepting work, finishes what is in flight, closes peer links.
  /// Idempotent.
  virtual void Shutdown() = 0;

  /// UNAVAILABLE (with what it is doing) while the node cannot take peer
  /// streams yet: handshakes are refused with it, and callers retry. The
  /// shadow answers so while it quantizes its copy of the model.
  virtual absl::Status ReadyForPeers() const { return absl::OkStatus(); }

  /// Fills the role-specific part of a handshake answer (worker info).
  virtual void FillWelcome(v1::Welcome* welcome) const {}
  /// Appends counters to a status answer.
  virtual void FillStatus(v1::NodeStatus* status) const {}
  /// The largest message the node's gRPC server accepts: what the node's
  /// largest legitimate request needs (a bigger one is refused by gRPC with
  /// RESOURCE_EXHAUSTED before it is parsed). kMaxMessageBytes by default.
  virtual size_t max_receive_message_bytes() const { return kMaxMessageBytes; }

  /// This node's credentials (cluster/peer_auth.h): what it signs its calls
  /// with and checks its callers against. Null until the node's Create set
  /// them; a node without them refuses every authenticated call.
  const PeerAuth* peer_auth() const { return peer_auth_.get(); }

  /// Timing spans of this node (Node.Trace turns recording on and off).
  TraceRecorder& trace() { return trace_; }

  v1::NodeState state() const { return state_.load(); }
  std::string state_detail() const {
    std::lock_guard<std::mutex> lock(detail_mu_);
    return detail_;
  }

 protected:
  void SetPeerAuth(std::shared_ptr<const PeerAuth> auth) { peer_auth_ = std::move(auth); }
  void SetState(v1::NodeState state, std::string detail = "") {
    {
      std::lock_guard<std::mutex> lock(detail_mu_);
      detail_ = std::move(detail);
    }
    state_.store(state);
  }

 private:
  TraceRecorder trace_;
  std::shared_ptr<const PeerAuth> peer_auth_;
  std::atomic<v1::NodeState> state_{v1::NODE_STATE_STARTING};
  mutable std::mutex detail_mu_;
  std::string detail_ = "starting";
};

}  // namespace odmoe
