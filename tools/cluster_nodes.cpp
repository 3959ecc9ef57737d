#include "cluster_nodes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/peer_auth.h"

namespace fs = std::filesystem;

namespace odmoe::cluster_tool {

std::vector<Node> NodesInStartOrder(const Topology& t) {
  std::vector<Node> nodes;
  for (const WorkerSpec& w : t.workers) nodes.push_back({&w, "worker"});
  if (t.shadow) nodes.push_back({&*t.shadow, "shadow"});
  nodes.push_back({&t.main, "main"});
  return nodes;
}

namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string PidPath(const Options& o, const Node& n) {
  return o.run_dir + "/" + n.spec->id + ".pid";
}
std::string LogPath(const Options& o, const Node& n) {
  return o.run_dir + "/" + n.spec->id + ".log";
}
// Exists while odmoe-cluster stops the node on purpose: the supervisor does
// not restart it.
std::string StoppingPath(const Options& o, const Node& n) {
  return o.run_dir + "/" + n.spec->id + ".stopping";
}
// Written by the supervisor when it gave up on the node (why, in one line).
std::string GaveUpPath(const Options& o, const Node& n) {
  return o.run_dir + "/" + n.spec->id + ".gave-up";
}
std::string SupervisorPidPath(const Options& o) { return o.run_dir + "/supervisor.pid"; }
std::string SupervisorLogPath(const Options& o) { return o.run_dir + "/supervisor.log"; }

namespace {

std::vector<std::string> NodeArgv(const Options& o, const Node& n) {
  std::vector<std::string> argv;
  if (!n.spec->netns.empty()) argv = {"ip", "netns", "exec", n.spec->netns};
  argv.push_back(o.bin_dir + "/odmoe-" + n.role);
  argv.push_back("--topology");
  argv.push_back(fs::absolute(o.topology_path).string());
  argv.push_back("--id");
  argv.push_back(n.spec->id);
  if (o.generated_secret) {
    // The topology names no secret: the one `up` keeps in the run directory
    // (a node on another host needs the same file at the same path).
    argv.push_back("--cluster-secret-file");
    argv.push_back(ClusterSecretPath(Topology(), o.run_dir));
  }
  return argv;
}

}  // namespace

namespace {

// The shell command that runs `remote` on `target` over ssh ($ODMOE_SSH or
// `ssh`), with its stdin from `input` (by default /dev/null, so that it never
// reads the terminal).
std::string SshCommand(const std::string& target, const std::string& remote,
                       const std::string& input = "/dev/null") {
  const char* ssh = std::getenv("ODMOE_SSH");
  return absl::StrCat(ssh && *ssh ? ssh : "ssh", " ", ShellQuote(target), " ", ShellQuote(remote),
                      " <", ShellQuote(input));
}

}  // namespace

namespace {

// Runs a shell command, returning its stdout.
std::string Capture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    *exit_code = 127;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return out;
}

}  // namespace

std::optional<PidRecord> ReadPid(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string first;
  in >> first;
  PidRecord r;
  if (first == "ssh") {
    r.remote = true;
    in >> r.target;
    in >> r.pid;
  } else if (!absl::SimpleAtoi(first, &r.pid)) {
    return std::nullopt;
  }
  if (r.pid <= 0) return std::nullopt;
  return r;
}

bool Alive(const PidRecord& r) {
  if (r.remote) {
    int code = 0;
    // Alive and not a zombie.
    Capture(SshCommand(r.target, "ps -o stat= -p " + std::to_string(r.pid) + " | grep -q '^[^Z]'"),
            &code);
    return code == 0;
  }
  // Reap it if it is our child and has exited; an exited process that its
  // new parent has not reaped yet (a zombie) counts as gone.
  waitpid(static_cast<pid_t>(r.pid), nullptr, WNOHANG);
  if (kill(static_cast<pid_t>(r.pid), 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(r.pid) + "/stat");
  std::string pid, comm, state;
  stat >> pid >> comm >> state;
  return state != "Z";
}

// Starts the node here. `append`: a restart, whose log goes on after the
// log of the run that died (which says why).
absl::StatusOr<PidRecord> StartLocal(const Options& o, const Node& n, bool append) {
  const std::vector<std::string> args = NodeArgv(o, n);
  const std::string log = LogPath(o, n);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setsid();
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    const int in = open("/dev/null", O_RDONLY);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    if (in >= 0) dup2(in, 0);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "odmoe-cluster: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  PidRecord r;
  r.pid = pid;
  return r;
}

namespace {

// Copies the files a node on another host needs from this machine to the
// same path there, over ssh (owner-only, written whole then renamed): the
// cluster secret and, with node_tls, the CA and the node's own certificate
// and key. A file missing here is left to the host (copied there by hand).
absl::Status ShipFiles(const Options& o, const Node& n) {
  std::vector<std::string> files = {o.secret_path};
  if (o.node_tls.enabled()) {
    const NodeTls mine = o.node_tls.ForNode(n.spec->id);
    files.insert(files.end(), {mine.ca, mine.cert, mine.key});
  }
  for (const std::string& file : files) {
    if (!fs::exists(file)) continue;
    const std::string tmp = file + ".odmoe-copy";
    const std::string remote = absl::StrCat(
        "umask 077 && mkdir -p ", ShellQuote(fs::path(file).parent_path().string()), " && cat > ",
        ShellQuote(tmp), " && mv -f ", ShellQuote(tmp), " ", ShellQuote(file));
    int code = 0;
    const std::string out = Capture(SshCommand(n.spec->ssh, remote, file) + " 2>&1", &code);
    if (code != 0) {
      return absl::UnavailableError(absl::StrCat("copying ", file, " to ", n.spec->ssh, " for ",
                                                 n.spec->id, " failed (exit ", code, "): ", out));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PidRecord> StartRemote(const Options& o, const Node& n, bool append) {
  if (absl::Status s = ShipFiles(o, n); !s.ok()) return s;
  std::vector<std::string> quoted;
  for (const std::string& a : NodeArgv(o, n)) quoted.push_back(ShellQuote(a));
  // The background subshell execs nohup, which execs the daemon: $! is the
  // daemon's pid, the one `down` kills.
  const std::string remote =
      absl::StrCat("cd ", ShellQuote(fs::current_path().string()), " && mkdir -p ",
                   ShellQuote(o.run_dir), " && exec nohup ", absl::StrJoin(quoted, " "),
                   append ? " >> " : " > ", ShellQuote(LogPath(o, n)), " 2>&1 & echo $!");
  int code = 0;
  const std::string out = Capture(SshCommand(n.spec->ssh, remote), &code);
  PidRecord r;
  r.remote = true;
  r.target = n.spec->ssh;
  if (code != 0 || !absl::SimpleAtoi(std::string(absl::StripAsciiWhitespace(out)), &r.pid)) {
    return absl::UnavailableError(absl::StrCat("starting ", n.spec->id, " over ssh on ",
                                               n.spec->ssh, " failed (exit ", code, "): ", out));
  }
  return r;
}

std::string LogTail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line)) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    absl::StrAppend(&out, "    ", all[i], "\n");
  }
  return out.empty() ? "    (empty log)\n" : out;
}

void StopNode(const Options& o, const Node& n, bool quiet) {
  const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
  fs::remove(GaveUpPath(o, n));
  if (!r) return;
  // On purpose: the supervisor must not restart it (removed with the pid file).
  std::ofstream(StoppingPath(o, n)) << r->pid << "\n";
  if (r->remote) {
    int code = 0;
    Capture(SshCommand(r->target, "kill " + std::to_string(r->pid) + " 2>/dev/null"), &code);
  } else {
    kill(static_cast<pid_t>(r->pid), SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Alive(*r) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Alive(*r)) {
    if (!quiet) std::cerr << "odmoe-cluster: " << n.spec->id << " ignored SIGTERM; killing it\n";
    if (r->remote) {
      int code = 0;
      Capture(SshCommand(r->target, "kill -9 " + std::to_string(r->pid)), &code);
    } else {
      kill(static_cast<pid_t>(r->pid), SIGKILL);
      waitpid(static_cast<pid_t>(r->pid), nullptr, 0);
    }
  }
  fs::remove(PidPath(o, n));
  fs::remove(StoppingPath(o, n));
}

// The supervisor of this run directory, if one is running.
std::optional<PidRecord> LiveSupervisor(const Options& o) {
  std::optional<PidRecord> r = ReadPid(SupervisorPidPath(o));
  if (r && !r->remote && Alive(*r)) return r;
  return std::nullopt;
}

// Stops the supervisor first (it stops every node in order and exits), so
// that nothing restarts a node that down stops.
void StopSupervisor(const Options& o, bool quiet) {
  const std::optional<PidRecord> r = LiveSupervisor(o);
  if (!r) return;
  kill(static_cast<pid_t>(r->pid), SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Alive(*r) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Alive(*r)) {
    if (!quiet) {
      std::cerr << "odmoe-cluster: the supervisor (pid " << r->pid
                << ") did not stop within 60 s; killing it\n";
    }
    kill(static_cast<pid_t>(r->pid), SIGKILL);
  }
  fs::remove(SupervisorPidPath(o));
}

// Stops every node in reverse start order: main first, workers last.
void StopAllNodes(const Options& o, const Topology& t, bool quiet) {
  std::vector<Node> nodes = NodesInStartOrder(t);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) StopNode(o, *it, quiet);
}

}  // namespace odmoe::cluster_tool
