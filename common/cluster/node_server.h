// A gRPC server for one NodeDaemon: its role services plus the Node service
// (Handshake, Status) that every daemon answers.
//
//   ODMOE_ASSIGN_OR_RETURN(auto server, NodeServer::Start("127.0.0.1:0", *daemon));
//   int port = server->port();          // the port actually bound
//   server->Shutdown(absl::Seconds(5)); // in-flight calls get that long
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/node_daemon.h"

namespace odmoe {

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
