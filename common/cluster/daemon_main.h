// The whole life of a daemon process, shared by odmoe-main, odmoe-shadow and
// odmoe-worker (each main.cpp is one call):
//   parse --topology FILE --id ID [--log-level L] -> load and validate the
//   topology -> build the node -> listen on its address -> Start() -> wait for
//   SIGTERM / SIGINT -> draining: Shutdown(), then the server with a deadline.
//
//   int main(int argc, char** argv) {
//     return odmoe::RunDaemon(argc, argv, "odmoe-worker", "Serve experts ...",
//                             odmoe::FactoryOf<odmoe::WorkerNode>());
//   }
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/node_daemon.h"
#include "topology/topology.h"

namespace odmoe {

using DaemonFactory = std::function<absl::StatusOr<std::unique_ptr<NodeDaemon>>(
    const Topology& topology, const std::string& node_id)>;

/// The factory of a node class with `static StatusOr<unique_ptr<NodeT>>
/// Create(const Topology&, const std::string& id)`.
template <typename NodeT>
DaemonFactory FactoryOf() {
  return [](const Topology& topology,
            const std::string& node_id) -> absl::StatusOr<std::unique_ptr<NodeDaemon>> {
    absl::StatusOr<std::unique_ptr<NodeT>> node = NodeT::Create(topology, node_id);
    if (!node.ok()) return node.status();
    return std::unique_ptr<NodeDaemon>(std::move(*node));
  };
}

/// After a clean shutdown the process exits with 0 (without the gRPC
/// library's slow global teardown); on any error it returns 1, having printed
/// one "<program>: error: ..." line.
int RunDaemon(int argc, char** argv, const char* program, const char* summary,
              const DaemonFactory& factory);

}  // namespace odmoe
