// odmoe-cluster's processes: where each node's pid file and log are, how a
// node is started here or over ssh, whether it is alive, and how it is
// stopped (tools/odmoe_cluster.cpp runs the commands; cluster_supervisor.h
// restarts what dies). Pid file contents: "<pid>" for a node of this machine,
// "ssh <target> <pid>" for one on another host.
//
//   const Node n{&topology.workers[0], "worker"};
//   absl::StatusOr<PidRecord> r = StartLocal(options, n);
//   std::ofstream(PidPath(options, n)) << r->pid << "\n";
//   if (!Alive(*ReadPid(PidPath(options, n)))) { ... }
//   StopNode(options, n, /*quiet=*/false);   // SIGTERM, SIGKILL after 10 s
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/topology.h"

namespace odmoe::cluster_tool {

/// The command line of odmoe-cluster.
struct Options {
  std::string command;
  std::string topology_path;
  std::string run_dir;
  std::string bin_dir;
  int timeout = 120;
  bool verbose = false;
  int workers = 0;           // scale
  int days = 825;            // certs
  int restarts = 5;          // up: restarts of one node within restart_window; 0 = no supervisor
  int restart_window = 60;   // seconds
  int max_local_nodes = 64;  // up: nodes on this machine
  bool generated_secret = false;  // the topology has no cluster_secret_file
  std::string secret_path;        // the secret the nodes use (ClusterSecretPath)
  NodeTls node_tls;               // the topology's
};

struct Node {
  const NodeSpec* spec;
  std::string role;  // main | shadow | worker
};

/// Workers, then the shadow, then the main node.
std::vector<Node> NodesInStartOrder(const Topology& t);

std::string PidPath(const Options& o, const Node& n);  // <run-dir>/<id>.pid
std::string LogPath(const Options& o, const Node& n);  // <run-dir>/<id>.log
/// <run-dir>/<id>.stopping: exists while odmoe-cluster stops the node on
/// purpose (the supervisor does not restart it).
std::string StoppingPath(const Options& o, const Node& n);
/// <run-dir>/<id>.gave-up: the supervisor gave up on the node (why, one line).
std::string GaveUpPath(const Options& o, const Node& n);
std::string SupervisorPidPath(const Options& o);  // <run-dir>/supervisor.pid
std::string SupervisorLogPath(const Options& o);  // <run-dir>/supervisor.log

struct PidRecord {
  bool remote = false;
  std::string target;
  long pid = 0;
};
std::optional<PidRecord> ReadPid(const std::string& path);
/// Alive and not a zombie (a child of this process that exited is reaped).
bool Alive(const PidRecord& r);

/// Starts the node on this machine (its own session, output to its log).
/// `append`: a restart, whose log goes on after the log of the run that died.
absl::StatusOr<PidRecord> StartLocal(const Options& o, const Node& n, bool append = false);
/// Starts the node over ssh after copying it the secret and its TLS files.
absl::StatusOr<PidRecord> StartRemote(const Options& o, const Node& n, bool append = false);

/// The last `lines` lines of a log, indented, for error messages.
std::string LogTail(const std::string& path, int lines);

/// SIGTERM, then SIGKILL after 10 s; marks the stop as on purpose first and
/// removes the pid file after.
void StopNode(const Options& o, const Node& n, bool quiet);
/// The supervisor of this run directory, if one is running.
std::optional<PidRecord> LiveSupervisor(const Options& o);
/// Stops the supervisor (it stops every node in order and exits), so that
/// nothing restarts a node that `down` stops.
void StopSupervisor(const Options& o, bool quiet);
/// Stops every node in reverse start order: main first, workers last.
void StopAllNodes(const Options& o, const Topology& t, bool quiet);

}  // namespace odmoe::cluster_tool
