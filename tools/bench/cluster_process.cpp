#include "bench/cluster_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/node_probe.h"
#include "util/logging.h"

namespace odmoe::bench {

int RunProgram(const std::vector<std::string>& argv, std::string* output) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
    if (output) output->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::StatusOr<std::unique_ptr<ClusterProcess>> ClusterProcess::Start(
    const Topology& topology, const std::string& name, const std::string& run_dir,
    const std::string& bin_dir, int timeout_seconds) {
  std::unique_ptr<ClusterProcess> c(new ClusterProcess());
  c->topology_ = topology;
  c->run_dir_ = absl::StrCat(run_dir, "/", name);
  c->bin_dir_ = bin_dir;
  std::error_code ec;
  std::filesystem::create_directories(c->run_dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat(c->run_dir_, ": ", ec.message()));
  c->yaml_path_ = absl::StrCat(run_dir, "/", name, ".yaml");
  {
    std::ofstream out(c->yaml_path_);
    out << "# written by odmoe-bench for the deployment '" << name << "'\n"
        << TopologyToYaml(topology);
    if (!out) return absl::InternalError(absl::StrCat(c->yaml_path_, ": cannot write"));
  }
  std::string output;
  const int rc = RunProgram({bin_dir + "/odmoe-cluster", "up", c->yaml_path_, "--run-dir",
                             c->run_dir_, "--bin-dir", bin_dir, "--timeout",
                             absl::StrCat(timeout_seconds)},
                            &output);
  c->owned_ = true;
  if (rc != 0) {
    c->Stop();
    return absl::UnavailableError(absl::StrCat("deployment '", name, "' did not start (",
                                               c->yaml_path_, ", logs in ", c->run_dir_,
                                               "):\n", output));
  }
  return c;
}

std::unique_ptr<ClusterProcess> ClusterProcess::Attach(const Topology& topology) {
  std::unique_ptr<ClusterProcess> c(new ClusterProcess());
  c->topology_ = topology;
  return c;
}

ClusterProcess::~ClusterProcess() { Stop(); }

absl::StatusOr<std::shared_ptr<const PeerAuth>> ClusterProcess::OperatorAuth() const {
  const std::string run_dir =
      !run_dir_.empty() ? run_dir_
                        : (std::filesystem::current_path() / "odmoe-run" /
                           std::filesystem::path(topology_.path).stem())
                              .string();
  return PeerAuth::ForOperator(topology_, run_dir);
}

void ClusterProcess::Stop() {
  if (!owned_) return;
  owned_ = false;
  std::string output;
  if (RunProgram({bin_dir_ + "/odmoe-cluster", "down", yaml_path_, "--run-dir", run_dir_},
                 &output) != 0) {
    ODMOE_LOG_WARN("odmoe-cluster down {}: {}", yaml_path_, output);
  }
}

std::vector<std::string> ClusterProcess::node_addresses() const {
  std::vector<std::string> out;
  for (const NodeSpec* n : topology_.AllNodes()) out.push_back(n->address);
  return out;
}

absl::StatusOr<std::vector<NodeCounters>> ClusterProcess::Snapshot() const {
  std::vector<NodeCounters> out;
  for (const NodeSpec* n : topology_.AllNodes()) {
    absl::StatusOr<NodeProbe> p = ProbeNode(n->address, absl::Seconds(5));
    if (!p.ok()) return p.status();
    NodeCounters c;
    c.id = p->node_id;
    c.role = p->role;
    c.worker = std::move(p->worker);
    c.process = p->process;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace odmoe::bench
