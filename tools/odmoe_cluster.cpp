// odmoe-cluster: start, inspect and stop a whole cluster described by a
// topology file, each node as its own process.
//
//   odmoe-cluster up deploy/testbed-10.yaml       # start every node, wait until all are ready
//   odmoe-cluster status deploy/testbed-10.yaml   # one line per node; exit 0 when all ready
//   odmoe-cluster down deploy/testbed-10.yaml     # SIGTERM, then SIGKILL after 10 s
//   odmoe-cluster scale deploy/testbed-10.yaml --workers 4
//   odmoe-cluster certs deploy/lan.yaml           # the CA and per-node certificates that
//                                                 # node_tls names (cert: certs/{id}.pem)
//
// Run directory (default ./odmoe-run/<topology stem>): <id>.log (stdout and
// stderr of the node) and <id>.pid.
//
// Supervision: `up` leaves a supervisor behind (supervisor.pid, its log
// supervisor.log) that restarts a node which dies unexpectedly (a non-zero
// exit or a signal), after 0.5 s, doubling to 10 s for a node that keeps
// dying (back to 0.5 s once it stayed up 30 s); a node restarted --restarts
// times (5) within --restart-window seconds (60) is given up on: left down,
// said in supervisor.log, <id>.gave-up and `status`. Every restart is logged
// with the exit status, and the node's log gets a line where it restarted.
// A clean stop is never restarted: `down` (which stops the supervisor
// first), SIGTERM or SIGINT to the supervisor (it stops every node), a
// worker that `scale` lets go, a node that exits 0. Nodes started by `scale`
// are watched too. `--restarts 0`: no supervisor (nothing restarts a node).
//
// A node with `netns: NAME` runs under `ip netns exec NAME`; a node with
// `ssh: user@host` is started over ssh (the program named by $ODMOE_SSH,
// default `ssh`): the remote host needs the same paths (repository,
// binaries, model) and key-based login; the cluster secret and the node's
// TLS files are copied there before it starts.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cluster/grpc_util.h"
#include "cluster/main_client.h"
#include "cluster/node_certificate.h"
#include "cluster/node_probe.h"
#include "cluster/peer_auth.h"
#include "cluster_nodes.h"
#include "cluster_supervisor.h"
#include "topology/topology.h"
#include "util/cli_args.h"
#include "util/progress_line.h"

namespace fs = std::filesystem;

namespace odmoe {
namespace {

using namespace cluster_tool;

int Fail(const std::string& message) {
  std::cerr << "odmoe-cluster: error: " << message << "\n";
  return 1;
}

// The cluster secret every node signs its calls with: the topology's file, or
// one generated once into the run directory (kept across up/down; delete it
// and run `up` again to rotate it). Checked here so that a bad file fails
// `up` before any node starts.
absl::Status PrepareSecret(const Options& o, const Topology& t) {
  const std::string path = ClusterSecretPath(t, o.run_dir);
  if (o.generated_secret && !fs::exists(path)) {
    if (absl::Status s = WriteNewClusterSecret(path); !s.ok()) return s;
    std::cout << "generated the cluster secret " << path << " (owner-only)\n";
  }
  absl::StatusOr<std::string> secret = LoadClusterSecret(path);
  if (!secret.ok()) {
    return absl::Status(secret.status().code(),
                        absl::StrCat(o.generated_secret ? "" : "cluster_secret_file: ",
                                     secret.status().message()));
  }
  return absl::OkStatus();
}

int Down(const Options& o, const Topology& t, bool quiet = false) {
  StopSupervisor(o, quiet);
  StopAllNodes(o, t, quiet);
  if (!quiet) std::cout << "cluster stopped (" << NodesInStartOrder(t).size() << " nodes)\n";
  return 0;
}

// The counters worth a glance; --verbose shows all of them.
bool Glance(const std::string& key) {
  static const std::set<std::string> keys = {"group",
                                             "experts_per_layer",
                                             "mode",
                                             "experts_held_peak",
                                             "memory_peak_bytes",
                                             "tasks",
                                             "hits",
                                             "misses",
                                             "reloads",
                                             "quantization",
                                             "iterations",
                                             "hints_sent",
                                             "prediction",
                                             "requests",
                                             "failures",
                                             "generated_tokens",
                                             "last_recall",
                                             "last_decode_tokens_per_second",
                                             "schedule_version",
                                             "live_groups",
                                             "active_workers",
                                             "serving"};
  return keys.count(key) > 0;
}

std::string Compact(const NodeProbe& p, bool verbose) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : p.entries) {
    if (verbose || Glance(k)) parts.push_back(k + "=" + v);
  }
  return absl::StrJoin(parts, " ");
}

int Status(const Options& o, const Topology& t) {
  bool all_ready = true;
  std::printf("%-10s %-7s %-22s %-9s %-9s %s\n", "NODE", "ROLE", "ADDRESS", "PID", "STATE",
              "DETAILS");
  for (const Node& n : NodesInStartOrder(t)) {
    const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
    std::string pid = "-";
    if (r) pid = std::to_string(r->pid) + (Alive(*r) ? "" : "(dead)");
    if (fs::exists(GaveUpPath(o, n))) pid += "(gave-up)";
    absl::StatusOr<NodeProbe> p = ProbeNode(n.spec->address, absl::Seconds(1));
    const std::string state = p.ok() ? p->state : "down";
    const std::string details = p.ok() ? (p->state == "ready" ? Compact(*p, o.verbose) : p->detail)
                                       : std::string(p.status().message());
    // A main node that is up but cannot serve (no complete worker group) is
    // not a ready cluster: /health says 503 then too.
    bool serving = true;
    if (p.ok()) {
      for (const auto& [k, v] : p->entries) {
        if (k == "serving" && v != "yes") serving = false;
      }
    }
    all_ready = all_ready && p.ok() && p->state == "ready" && serving;
    std::printf("%-10s %-7s %-22s %-9s %-9s %s\n", n.spec->id.c_str(), n.role.c_str(),
                n.spec->address.c_str(), pid.c_str(), state.c_str(), details.c_str());
  }
  const std::optional<PidRecord> supervisor = LiveSupervisor(o);
  std::printf(
      "supervisor: %s\n",
      supervisor
          ? absl::StrCat("pid ", supervisor->pid, " (log ", SupervisorLogPath(o), ")").c_str()
          : "none (nothing restarts a node that dies)");
  return all_ready ? 0 : 1;
}

// Prints why `n` did not come up, with the end of its log.
void ReportFailure(const Options& o, const Node& n, const std::string& why) {
  std::cerr << "odmoe-cluster: " << n.spec->id << " " << why << "; last lines of " << LogPath(o, n)
            << ":\n"
            << LogTail(LogPath(o, n), 10);
}

// Polls every node until all are ready (true), or one exits or fails, or the
// timeout passes (false, after reporting which node and why).
// Shows which nodes are not ready yet, their state and the time left, on one
// line (rewritten on a terminal, every few seconds in a log).

bool WaitUntilReady(const Options& o, const std::vector<Node>& nodes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout);
  std::vector<bool> ready(nodes.size(), false);
  std::vector<std::string> state(nodes.size(), "no answer yet");
  ProgressLine progress(stdout);
  while (true) {
    if (g_stop_signal != 0) {
      progress.Finish(absl::StrCat("signal ", static_cast<int>(g_stop_signal),
                                   ": stopping before every node was ready"));
      return false;
    }
    size_t n_ready = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (!ready[i]) {
        const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
        if (!r || !Alive(*r)) {
          ReportFailure(o, n, "exited during start-up");
          return false;
        }
        absl::StatusOr<NodeProbe> p = ProbeNode(n.spec->address, absl::Milliseconds(300));
        if (p.ok() && p->state == "failed") {
          ReportFailure(o, n, "failed: " + p->detail);
          return false;
        }
        ready[i] = p.ok() && p->state == "ready";
        if (p.ok()) state[i] = p->detail.empty() ? p->state : p->state + ": " + p->detail;
      }
      n_ready += ready[i] ? 1 : 0;
    }
    if (n_ready == nodes.size()) {
      progress.Finish(absl::StrCat("all ", nodes.size(), " nodes ready"));
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    std::vector<std::string> waiting;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!ready[i]) waiting.push_back(absl::StrCat(nodes[i].spec->id, " (", state[i], ")"));
    }
    progress.Update(absl::StrCat(n_ready, "/", nodes.size(), " ready; waiting for ",
                                 absl::StrJoin(waiting, ", "), "; ",
                                 std::max<int64_t>(0, left.count()), " s left"));
    if (std::chrono::steady_clock::now() > deadline) {
      progress.Finish(absl::StrCat(n_ready, "/", nodes.size(), " ready after ", o.timeout, " s"));
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (!ready[i]) {
          ReportFailure(o, nodes[i], absl::StrCat("not ready after ", o.timeout, " s"));
        }
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Starts every node and waits until all are ready (the progress on this
// process's output). 0 on success; on failure every node is stopped again.
int StartCluster(const Options& o, const Topology& t) {
  const std::vector<Node> nodes = NodesInStartOrder(t);
  for (const Node& n : nodes) {
    absl::StatusOr<PidRecord> r = n.spec->ssh.empty() ? StartLocal(o, n) : StartRemote(o, n);
    if (!r.ok()) {
      StopAllNodes(o, t, true);
      return Fail(std::string(r.status().message()));
    }
    fs::remove(GaveUpPath(o, n));
    std::ofstream(PidPath(o, n)) << (r->remote ? "ssh " + r->target + " " : "") << r->pid << "\n";
  }
  std::cout << "started " << nodes.size() << " nodes (logs in " << o.run_dir
            << "); waiting for them to be ready\n";
  if (!WaitUntilReady(o, nodes)) {
    StopAllNodes(o, t, true);
    return 1;
  }
  std::cout << "cluster ready: main at " << t.main.address << ", " << t.n_workers()
            << " workers in " << t.n_groups() << (t.n_groups() == 1 ? " group" : " groups")
            << " of " << t.group_size << ", prediction " << PredictionModeName(t.prediction)
            << "\n";
  return 0;
}

// up with a supervisor: a child process (its own session) starts the nodes,
// so that it is their parent and learns how each ended; this process shows
// its progress (the child writes to the same output) and forwards SIGTERM
// and SIGINT to it. Once every node is ready the child moves its output to
// supervisor.log, tells this process (one byte on a pipe) and supervises;
// this process exits 0. If the start fails, the child exits non-zero and so
// does this process.
pid_t g_supervisor_child = 0;
void ForwardStopSignal(int sig) {
  if (g_supervisor_child > 0) kill(g_supervisor_child, sig);
}

int UpSupervised(const Options& o, const Topology& t) {
  int ready_pipe[2];
  if (pipe2(ready_pipe, O_CLOEXEC) != 0) return Fail("cannot create a pipe");
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) return Fail("fork failed");
  if (child == 0) {
    close(ready_pipe[0]);
    setsid();
    signal(SIGTERM, OnStopSignal);
    signal(SIGINT, OnStopSignal);
    signal(SIGHUP, SIG_IGN);
    if (const int rc = StartCluster(o, t); rc != 0) {
      std::cout.flush();
      std::fflush(nullptr);
      _exit(rc);
    }
    std::ofstream(SupervisorPidPath(o)) << getpid() << "\n";
    Status(o, t);
    std::cout << "supervisor: pid " << getpid() << " restarts a node that dies (at most "
              << o.restarts << " times in " << o.restart_window << " s; log "
              << SupervisorLogPath(o) << ")\n";
    std::cout.flush();
    std::fflush(nullptr);
    // From now on: no terminal, output to the log (the caller's pipe closes).
    const int log = open(SupervisorLogPath(o).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int null = open("/dev/null", O_RDONLY);
    if (log >= 0) {
      dup2(log, 1);
      dup2(log, 2);
      close(log);
    }
    if (null >= 0) {
      dup2(null, 0);
      close(null);
    }
    const char ok = 0;
    (void)!write(ready_pipe[1], &ok, 1);
    close(ready_pipe[1]);
    const int rc = Supervise(o, t);
    std::cout.flush();
    std::fflush(nullptr);
    _exit(rc);
  }
  close(ready_pipe[1]);
  g_supervisor_child = child;
  signal(SIGTERM, ForwardStopSignal);
  signal(SIGINT, ForwardStopSignal);
  char byte = 1;
  ssize_t n;
  do {
    n = read(ready_pipe[0], &byte, 1);
  } while (n < 0 && errno == EINTR);
  close(ready_pipe[0]);
  if (n == 1) return 0;  // ready; the child supervises
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
}

int Up(const Options& o, const Topology& t) {
  const std::vector<Node> nodes = NodesInStartOrder(t);
  if (const std::optional<PidRecord> s = LiveSupervisor(o)) {
    return Fail(absl::StrCat("the supervisor of this run directory (", o.run_dir,
                             ") is still running (pid ", s->pid,
                             "); run `odmoe-cluster down` first"));
  }
  for (const Node& n : nodes) {
    const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
    if (r && Alive(*r)) {
      return Fail(absl::StrCat("node ", n.spec->id, " of this run directory (", o.run_dir,
                               ") is still running (pid ", r->pid,
                               "); run `odmoe-cluster down` first"));
    }
  }
  const int local = static_cast<int>(
      std::count_if(nodes.begin(), nodes.end(), [](const Node& n) { return n.spec->ssh.empty(); }));
  if (local > o.max_local_nodes) {
    return Fail(absl::StrCat(local,
                             " nodes would run on this machine (every node without ssh:), "
                             "more than --max-local-nodes ",
                             o.max_local_nodes,
                             " (each is a process with its own copy of the work; raise the "
                             "bound only for a machine that can serve them)"));
  }
  for (const Node& n : nodes) {
    if (!n.spec->ssh.empty()) continue;
    const std::string bin = o.bin_dir + "/odmoe-" + n.role;
    if (access(bin.c_str(), X_OK) != 0) return Fail("cannot run " + bin + " (see --bin-dir)");
  }
  std::error_code ec;
  fs::create_directories(o.run_dir, ec);
  if (ec) return Fail("cannot create the run directory " + o.run_dir + ": " + ec.message());
  if (absl::Status s = PrepareSecret(o, t); !s.ok()) return Fail(std::string(s.message()));
  if (o.restarts > 0) return UpSupervised(o, t);
  signal(SIGTERM, OnStopSignal);
  signal(SIGINT, OnStopSignal);
  if (const int rc = StartCluster(o, t); rc != 0) return rc;
  Status(o, t);
  return 0;
}

// The main node's live groups ("0,1,3") from its status, or nullopt.
std::optional<std::vector<int>> LiveGroups(const Topology& t) {
  absl::StatusOr<NodeProbe> p = ProbeNode(t.main.address, absl::Seconds(1));
  if (!p.ok()) return std::nullopt;
  for (const auto& [k, v] : p->entries) {
    if (k != "live_groups") continue;
    std::vector<int> groups;
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      int g = 0;
      if (absl::SimpleAtoi(part, &g)) groups.push_back(g);
    }
    return groups;
  }
  return std::nullopt;
}

// scale: the first `workers` workers take layers. Missing ones are started
// (and must become ready) before the main node is told; workers beyond the
// count are stopped once the main node's schedule has let them go (it
// changes at a token boundary) or after a few seconds (a layer that was in
// flight on them is then recomputed elsewhere, with the same result).
int Scale(const Options& o, const Topology& t) {
  const int n = o.workers;
  const int g = t.group_size;
  if (n < g || n > t.n_workers() || n % g != 0) {
    return Fail(absl::StrCat("--workers ", n, ": expected a multiple of the group size ", g,
                             " from ", g, " to ", t.n_workers(), " (the topology's workers)"));
  }
  std::vector<Node> start;
  for (int i = 0; i < n; ++i) {
    const Node node{&t.workers[static_cast<size_t>(i)], "worker"};
    const std::optional<PidRecord> r = ReadPid(PidPath(o, node));
    if (!r || !Alive(*r)) start.push_back(node);
  }
  for (const Node& node : start) {
    absl::StatusOr<PidRecord> r =
        node.spec->ssh.empty() ? StartLocal(o, node) : StartRemote(o, node);
    if (!r.ok()) return Fail(std::string(r.status().message()));
    std::ofstream(PidPath(o, node))
        << (r->remote ? "ssh " + r->target + " " : "") << r->pid << "\n";
  }
  if (!start.empty()) {
    std::cout << "started " << start.size() << " worker(s); waiting for them to be ready\n";
    if (!WaitUntilReady(o, start)) {
      for (const Node& node : start) StopNode(o, node, true);
      return 1;
    }
  }
  absl::StatusOr<std::shared_ptr<const PeerAuth>> op = PeerAuth::ForOperator(t, o.run_dir);
  if (!op.ok()) return Fail(std::string(op.status().message()));
  absl::StatusOr<v1::ScaleReply> reply = ScaleOnMain(t.main.address, n, op->get());
  if (!reply.ok()) return Fail(std::string(reply.status().message()));
  const int groups = n / g;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    std::optional<std::vector<int>> live = LiveGroups(t);
    if (live && std::all_of(live->begin(), live->end(), [&](int x) { return x < groups; })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int stopped = 0;
  for (int i = n; i < t.n_workers(); ++i) {
    const Node node{&t.workers[static_cast<size_t>(i)], "worker"};
    const std::optional<PidRecord> r = ReadPid(PidPath(o, node));
    if (!r) continue;
    StopNode(o, node, true);
    ++stopped;
  }
  std::cout << "scaled to " << n << " workers (" << groups << (groups == 1 ? " group" : " groups")
            << " of " << g << "): " << start.size() << " started, " << stopped << " stopped\n";
  return 0;
}

// certs: the CA and one certificate per node (and the operator) that the
// topology's per-node node_tls names, each naming its role
// (cluster/node_certificate.h); existing files are kept.
int Certs(const Options& o, const Topology& t) {
  absl::StatusOr<IssuedCertificates> made = IssueClusterCertificates(t, o.days);
  if (!made.ok()) return Fail(std::string(made.status().message()));
  for (const std::string& f : made->written) std::cout << "wrote " << f << "\n";
  std::cout << made->written.size() << " files written, " << made->kept.size()
            << " certificates kept (valid " << o.days << " days from their issue); the CA key "
            << CaKeyPath(t.node_tls)
            << " signs new ones: keep it off the nodes' hosts once every certificate exists\n";
  return 0;
}

std::string DefaultBinDir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("build/bin") : self.parent_path().string();
}

}  // namespace
}  // namespace odmoe

int main(int argc, char** argv) {
  using namespace odmoe;
  signal(SIGPIPE, SIG_IGN);
  Options o;
  CliArgs args("odmoe-cluster",
               "Start (up), inspect (status), stop (down) or scale (scale --workers N) the "
               "cluster a topology describes, or issue its TLS certificates (certs).");
  args.AddString("run-dir", &o.run_dir, "DIR", "logs and pid files (default ./odmoe-run/<name>)");
  args.AddString("bin-dir", &o.bin_dir, "DIR", "where the daemons are (default: next to this)");
  args.AddInt("timeout", &o.timeout, "SECONDS", "how long `up` waits for readiness (120)");
  args.AddFlag("verbose", &o.verbose, "status: every counter of every node");
  args.AddInt("workers", &o.workers, "N", "scale: how many workers take layers");
  args.AddInt("days", &o.days, "N", "certs: how long new certificates are valid (825)");
  args.AddInt("restarts", &o.restarts, "N",
              "up: restart a node that dies at most N times within --restart-window (5); 0 = "
              "no supervisor");
  args.AddInt("restart-window", &o.restart_window, "SECONDS",
              "up: the window --restarts counts in (60)");
  args.AddInt("max-local-nodes", &o.max_local_nodes, "N",
              "up: the most nodes this machine may run (64)");
  args.AllowPositional("up|down|status|scale|certs TOPOLOGY", 2);
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;
  auto usage = [](const std::string& why) {
    std::cerr << "odmoe-cluster: error: " << why << " (see --help)\n";
    return CliArgs::kUsageExit;
  };
  if (args.positional().size() != 2) {
    return usage("expected a command and a topology: up|down|status|scale|certs TOPOLOGY");
  }
  o.command = args.positional()[0];
  o.topology_path = args.positional()[1];
  if (o.command != "up" && o.command != "down" && o.command != "status" && o.command != "scale" &&
      o.command != "certs") {
    return usage("unknown command '" + o.command +
                 "' (expected up, down, status, scale or certs)");
  }
  absl::StatusOr<Topology> t = LoadTopology(o.topology_path);
  if (!t.ok()) return Fail(std::string(t.status().message()));
  if (o.command == "certs") return Certs(o, *t);
  if (absl::Status s = UseNodeTls(t->node_tls.ForNode(kOperatorId)); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (o.run_dir.empty()) {
    o.run_dir = (fs::current_path() / "odmoe-run" / fs::path(o.topology_path).stem()).string();
  }
  o.run_dir = fs::absolute(o.run_dir).string();
  o.generated_secret = t->cluster_secret_file.empty();
  o.secret_path = ClusterSecretPath(*t, o.run_dir);
  o.node_tls = t->node_tls;
  if (o.bin_dir.empty()) o.bin_dir = DefaultBinDir();
  o.bin_dir = fs::absolute(o.bin_dir).string();
  if (o.timeout < 1 || o.timeout > 86400) return Fail("--timeout must be in 1..86400 seconds");
  if (o.restarts < 0 || o.restarts > 1000) return Fail("--restarts must be in 0..1000");
  if (o.restart_window < 1 || o.restart_window > 86400) {
    return Fail("--restart-window must be in 1..86400 seconds");
  }
  if (o.max_local_nodes < 1 || o.max_local_nodes > 100000) {
    return Fail("--max-local-nodes must be in 1..100000");
  }
  if (o.command == "up") return Up(o, *t);
  if (o.command == "down") return Down(o, *t);
  if (o.command == "scale") return Scale(o, *t);
  return Status(o, *t);
}
