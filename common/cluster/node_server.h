// A gRPC server for one NodeDaemon: its role services plus the Node service
// (Handshake, Status, Trace) that every daemon answers. It accepts messages up
// to the daemon's max_receive_message_bytes(); Node.Trace keeps at most
// kMaxTraceSpans spans (a larger capacity is INVALID_ARGUMENT).
//
//   ODMOE_ASSIGN_OR_RETURN(auto server, NodeServer::Start("127.0.0.1:0", *daemon));
//   int port = server->port();          // the port actually bound
//   server->Shutdown(absl::Seconds(5)); // in-flight calls get that long
#pragma once

#include <memory>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/node_daemon.h"

namespace odmoe {

/// The most spans Node.Trace START may ask a node to keep (about 120 MB of
/// memory on the node, a STOP reply of about 40 MB); 0 asks for the default.
inline constexpr uint32_t kMaxTraceSpans = 1000000;
inline constexpr uint32_t kDefaultTraceSpans = 200000;

class NodeServer {
 public:
  /// INVALID_ARGUMENT / UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<NodeServer>> Start(const std::string& address,
                                                           NodeDaemon& daemon);
  ~NodeServer();
  int port() const { return port_; }
  void Shutdown(absl::Duration deadline);

 private:
  NodeServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace odmoe
