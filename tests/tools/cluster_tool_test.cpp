// odmoe-cluster's process handling, with stand-in daemons (shell scripts) in
// place of the real ones: what it starts, how (netns, ssh), that it stops
// everything it started, and that it refuses to start twice. The real daemons
// are exercised by tests/cluster/cluster_processes_test.cpp.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "shell.h"
#include "test_paths.h"

namespace odmoe {
namespace {

namespace fs = std::filesystem;
using test::Sh;
using test::ShellResult;

// A port nobody listens on right now, so that no real node answers a probe;
// never one this process was given before (the kernel may hand out the same
// port twice in a row, and a topology with it twice is refused).
int FreePort() {
  static std::set<int> given;
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    const int port = ntohs(a.sin_port);
    if (given.insert(port).second) return port;
  }
}

// True once `pid` has exited (a zombie counts as exited).
bool Gone(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string id, comm, state;
  stat >> id >> comm >> state;
  return state == "Z";
}

// A fresh directory with a topology of main, shadow and two workers on free
// loopback ports; `extra` is added to every node's mapping.
class Sandbox {
 public:
  explicit Sandbox(const std::string& name, const std::string& extra = "")
      : dir_(fs::temp_directory_path() / absl::StrCat("odmoe_cluster_tool_", name, "_", getpid())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    std::string yaml =
        absl::StrCat("model: ", test::SourcePath("models/tiny-mixtral-f16.gguf"),
                     "\nmain: { id: main, address: \"127.0.0.1:", FreePort(), "\"", extra,
                     " }\nshadow: { id: shadow, address: \"127.0.0.1:", FreePort(), "\"", extra,
                     " }\nworkers:\n  nodes:\n");
    for (int i = 0; i < 2; ++i) {
      absl::StrAppend(&yaml, "    - { id: w", i, ", address: \"127.0.0.1:", FreePort(), "\"", extra,
                      " }\n");
    }
    std::ofstream(topology()) << yaml;
  }
  ~Sandbox() { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string topology() const { return path("t.yaml"); }
  std::string run_dir() const { return path("run"); }

  // Writes an executable shell script.
  void Script(const std::string& name, const std::string& body) const {
    std::ofstream(path(name)) << "#!/bin/sh\n" << body;
    fs::permissions(path(name), fs::perms::owner_all);
  }
  // The same stand-in for all three daemons.
  void FakeDaemons(const std::string& body) const {
    for (const char* name : {"odmoe-worker", "odmoe-shadow", "odmoe-main"}) {
      Script(std::string("bin/") + name, body);
    }
  }
  ShellResult Cluster(const std::string& command, const std::string& env = "") const {
    return Sh(absl::StrCat(env, " ", test::BinaryPath("bin/odmoe-cluster"), " ", command, " ",
                           topology(), " --bin-dir ", path("bin"), " --run-dir ", run_dir()));
  }
  // The pid a stand-in daemon wrote into <dir>/<id>.self.
  long SelfPid(const std::string& id) const {
    std::ifstream in(path(id + ".self"));
    long pid = 0;
    in >> pid;
    return pid;
  }

 private:
  fs::path dir_;
};

// The node id from the stand-in's arguments: --topology FILE --id ID.
const char kRecordSelf[] = "echo $$ > \"$(dirname \"$0\")/../$4.self\"\n";

// Starts `command` in the background and returns its pid.
long Spawn(const std::string& command) {
  const ShellResult r = Sh(command + " >/dev/null 2>&1 </dev/null & echo $!");
  REQUIRE(r.exit_code == 0);
  return std::stol(r.output);
}

void WaitGone(long pid) {
  for (int i = 0; i < 100 && !Gone(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

TEST_CASE("odmoe-cluster: a missing daemon binary is named", "[cli][cluster-tool]") {
  const Sandbox box("missing");
  const ShellResult r = box.Cluster("up");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("odmoe-cluster: error: cannot run " + box.path("bin/odmoe-worker") +
                      " (see --bin-dir)") != std::string::npos);
  CHECK(!fs::exists(box.run_dir()));  // nothing was started
}

TEST_CASE("odmoe-cluster: nodes that never get ready time out and are stopped",
          "[cli][cluster-tool]") {
  const Sandbox box("timeout");
  box.FakeDaemons(std::string(kRecordSelf) + "echo \"stand-in $*\"\nexec sleep 30\n");
  const ShellResult r = box.Cluster("up --timeout 1");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("started 4 nodes") != std::string::npos);
  for (const std::string id : {"main", "shadow", "w0", "w1"}) {
    INFO(id);
    // Each was started with the absolute topology and its own id, its output
    // went to <run-dir>/<id>.log, and it was stopped again.
    CHECK(r.output.find("odmoe-cluster: " + id + " not ready after 1 s") != std::string::npos);
    CHECK(r.output.find("stand-in --topology " + box.topology() + " --id " + id) !=
          std::string::npos);
    const long pid = box.SelfPid(id);
    REQUIRE(pid > 0);
    WaitGone(pid);
    CHECK(Gone(pid));
    CHECK(fs::exists(box.run_dir() + "/" + id + ".log"));
    CHECK(!fs::exists(box.run_dir() + "/" + id + ".pid"));
  }
}

TEST_CASE("odmoe-cluster: up refuses while a node of the run directory lives, down stops it",
          "[cli][cluster-tool]") {
  const Sandbox box("running");
  box.FakeDaemons("exit 0\n");
  const long pid = Spawn("sleep 30");
  fs::create_directories(box.run_dir());
  std::ofstream(box.run_dir() + "/w1.pid") << pid << "\n";

  ShellResult r = box.Cluster("up");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("node w1 of this run directory") != std::string::npos);
  CHECK(r.output.find("still running (pid " + std::to_string(pid) + ")") != std::string::npos);

  r = box.Cluster("status");
  INFO(r.output);
  CHECK(r.exit_code == 1);  // nothing answers
  CHECK(r.output.find(std::to_string(pid) + " ") != std::string::npos);
  CHECK(r.output.find("(dead)") == std::string::npos);
  CHECK(r.output.find("down") != std::string::npos);

  r = box.Cluster("down");
  CHECK(r.exit_code == 0);
  WaitGone(pid);
  CHECK(Gone(pid));
  CHECK(!fs::exists(box.run_dir() + "/w1.pid"));
  CHECK(box.Cluster("down").exit_code == 0);  // already down is fine
}

TEST_CASE("odmoe-cluster: down kills a node that ignores SIGTERM", "[cli][cluster-tool]") {
  const Sandbox box("ignores_term");
  const long pid = Spawn("sh -c \"trap '' TERM; while :; do sleep 0.1; done\"");
  fs::create_directories(box.run_dir());
  std::ofstream(box.run_dir() + "/main.pid") << pid << "\n";
  const auto start = std::chrono::steady_clock::now();
  const ShellResult r = box.Cluster("down");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("main ignored SIGTERM; killing it") != std::string::npos);
  CHECK(seconds >= 9.5);  // it had its 10 s
  WaitGone(pid);
  CHECK(Gone(pid));
}

TEST_CASE("odmoe-cluster: a node with netns runs under ip netns exec", "[cli][cluster-tool]") {
  const Sandbox box("netns", ", netns: ns-x");
  // A stand-in for `ip` that records its arguments and runs the command.
  box.Script("ip", "echo \"$*\" >> " + box.path("ip.args") + "\nshift 3\nexec \"$@\"\n");
  box.FakeDaemons("echo 'stand-in: no model here' >&2\nexit 3\n");
  const ShellResult r = box.Cluster("up", "PATH=" + box.path("") + ":$PATH");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("exited during start-up") != std::string::npos);
  CHECK(r.output.find("stand-in: no model here") != std::string::npos);
  std::ifstream in(box.path("ip.args"));
  const std::string args((std::istreambuf_iterator<char>(in)), {});
  CHECK(args.find("netns exec ns-x " + box.path("bin/odmoe-worker") + " --topology " +
                  box.topology() + " --id w0") != std::string::npos);
}

TEST_CASE("odmoe-cluster: a node started over ssh is the process that down stops",
          "[cli][cluster-tool]") {
  const Sandbox box("ssh", ", ssh: ops@far");
  // A stand-in for ssh: records the target and runs the remote command here
  // with bash, the usual login shell. Where bash forks a subshell for the
  // backgrounded command (dash would exec), that subshell must not be what
  // `$!` names, nor keep ssh's output open (ssh would then wait for the daemon
  // to exit).
  box.Script("ssh", "echo \"$1\" >> " + box.path("ssh.targets") + "\nshift\nexec bash -c \"$*\"\n");
  box.FakeDaemons(std::string(kRecordSelf) + "echo 'remote stand-in'\nexec sleep 30\n");
  const auto start = std::chrono::steady_clock::now();
  const ShellResult r = box.Cluster("up --timeout 1", "ODMOE_SSH=" + box.path("ssh"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(seconds < 15);  // not 4 x 30 s of ssh waiting for each daemon
  CHECK(r.output.find("main not ready after 1 s") != std::string::npos);
  CHECK(r.output.find("remote stand-in") != std::string::npos);  // its log, via nohup
  for (const std::string id : {"main", "shadow", "w0", "w1"}) {
    INFO(id);
    const long pid = box.SelfPid(id);
    REQUIRE(pid > 0);
    WaitGone(pid);  // `ssh ops@far kill <pid>` reached the daemon itself
    CHECK(Gone(pid));
  }
  std::ifstream in(box.path("ssh.targets"));
  const std::string targets((std::istreambuf_iterator<char>(in)), {});
  CHECK(targets.find("ops@far") == 0);
}

}  // namespace odmoe
