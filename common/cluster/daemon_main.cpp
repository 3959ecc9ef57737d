#include "cluster/daemon_main.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cluster/grpc_util.h"
#include "cluster/node_certificate.h"
#include "cluster/node_server.h"
#include "util/cli_args.h"
#include "util/logging.h"
#include "util/step_progress.h"

namespace odmoe {
namespace {

int Fail(const char* program, const absl::Status& s) {
  std::cerr << program << ": error: " << s.message() << "\n";
  return 1;
}

}  // namespace

int RunDaemon(int argc, char** argv, const char* program, const char* summary,
              const DaemonFactory& factory) {
  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string topology_path, node_id, secret_file;
  CliArgs args(program, summary);
  args.AddString("topology", &topology_path, "FILE", "cluster topology (YAML)", true);
  args.AddString("id", &node_id, "ID", "this node's id in the topology", true);
  args.AddString("cluster-secret-file", &secret_file, "FILE",
                 "the cluster secret (owner-only file) instead of the topology's "
                 "cluster_secret_file (odmoe-cluster up passes the one it generates)");
  args.SetDefaultLogLevel("info");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  SetLogNodeId(node_id);
  SetProgressOutput(ProgressOutput::kLog);  // long start-up steps: into the node's log
  absl::StatusOr<Topology> topology = LoadTopology(topology_path);
  if (!topology.ok()) return Fail(program, topology.status());
  if (!secret_file.empty()) {
    topology->cluster_secret_file = std::filesystem::absolute(secret_file).string();
  }
  if (absl::Status s = UseNodeTls(topology->node_tls.ForNode(node_id)); !s.ok()) {
    return Fail(program, s);
  }
  if (const NodeSpec* open = topology->FirstNonLoopbackNode();
      open != nullptr && !topology->node_tls.enabled()) {
    // Only reachable with `insecure: true` (the topology check refuses it otherwise).
    ODMOE_LOG_WARN(
        "insecure: true: links between nodes are plain TCP on non-loopback addresses "
        "({} at {}, ...); any host that can reach them can send tasks and hints",
        open->id, open->address);
  }
  const NodeSpec* spec = topology->FindNode(node_id);
  if (spec == nullptr) {
    return Fail(program,
                absl::NotFoundError("node id '" + node_id + "' is not in " + topology_path));
  }
  if (const std::optional<PeerRole> role = RoleInTopology(*topology, node_id)) {
    if (absl::Status s = CheckOwnCertificate(*role, node_id); !s.ok()) return Fail(program, s);
  }
  absl::StatusOr<std::unique_ptr<NodeDaemon>> node = factory(*topology, node_id);
  if (!node.ok()) return Fail(program, node.status());
  absl::StatusOr<std::unique_ptr<NodeServer>> server = NodeServer::Start(spec->address, **node);
  if (!server.ok()) return Fail(program, server.status());
  if (absl::Status s = (*node)->Start(); !s.ok()) return Fail(program, s);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  ODMOE_LOG_INFO("signal {}: draining", sig);
  (*node)->Shutdown();
  (*server)->Shutdown(absl::Seconds(5));
  server->reset();
  node->reset();
  ODMOE_LOG_INFO("stopped");
  // Everything the node owns is closed; skip the gRPC library's slow global
  // teardown (seconds) so that `down` and restarts are quick.
  spdlog::shutdown();
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace odmoe
