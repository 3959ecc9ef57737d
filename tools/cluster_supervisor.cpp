#include "cluster_supervisor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/restart_policy.h"

namespace fs = std::filesystem;

namespace odmoe::cluster_tool {

volatile sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int sig) { g_stop_signal = sig; }

namespace {

// How a node ended, for the log: "exited with status 3", "was killed by
// signal 9 (Killed)".
std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", name ? name : "?", ")");
  }
  return absl::StrCat("ended (wait status ", status, ")");
}

std::string Now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One line of the supervisor's log.
void SupervisorLog(const std::string& line) { std::cout << Now() << " " << line << std::endl; }

// The supervisor's view of one node.
struct Watched {
  enum class State { kRunning, kWaiting, kStopped };
  Watched(Node n, const RestartLimits& limits) : node(n), policy(limits) {}
  Node node;
  State state = State::kRunning;
  PidRecord pid;       // kRunning: the process
  bool child = false;  // started by this process: waitpid tells how it ended
  RestartPolicy policy;
  std::chrono::steady_clock::time_point started, next_start, next_remote_check;
  std::string last_exit;  // how it last ended
};

}  // namespace

// Restarts the nodes of `t` that die unexpectedly, until SIGTERM or SIGINT
// (then stops every node). Runs in the process that started the nodes, so
// that waitpid tells how each ended.
int Supervise(const Options& o, const Topology& t) {
  using Clock = std::chrono::steady_clock;
  RestartLimits limits;
  limits.max_restarts = o.restarts;
  limits.window = std::chrono::seconds(o.restart_window);
  std::vector<Watched> nodes;
  for (const Node& n : NodesInStartOrder(t)) {
    Watched w(n, limits);
    const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
    w.state = r ? Watched::State::kRunning : Watched::State::kStopped;
    if (r) w.pid = *r;
    w.child = r && !r->remote;
    w.started = Clock::now();
    w.policy.Started(w.started);
    nodes.push_back(std::move(w));
  }
  SupervisorLog(absl::StrCat("supervising ", nodes.size(), " nodes (pid ", getpid(), "): a node ",
                             "that dies is restarted, at most ", o.restarts, " times in ",
                             o.restart_window, " s"));
  while (g_stop_signal == 0) {
    const Clock::time_point now = Clock::now();
    for (Watched& w : nodes) {
      const Node& n = w.node;
      const std::optional<PidRecord> r = ReadPid(PidPath(o, n));
      const bool same = r && r->pid == w.pid.pid && r->remote == w.pid.remote;
      if (w.state != Watched::State::kRunning) {
        // Started by someone else (scale, by hand): watch that process.
        if (r && !same && !fs::exists(StoppingPath(o, n)) && Alive(*r)) {
          SupervisorLog(absl::StrCat(n.spec->id, ": watching pid ", r->pid,
                                     " (started by another odmoe-cluster command)"));
          w = Watched(n, limits);
          w.pid = *r;
          w.started = now;
          w.policy.Started(now);
          fs::remove(GaveUpPath(o, n));
          continue;
        }
      }
      if (w.state == Watched::State::kStopped) continue;
      if (!same || fs::exists(StoppingPath(o, n))) {
        // Its pid file is gone or names another process: stopped on purpose
        // (down, scale) or replaced; not ours to restart.
        if (w.state == Watched::State::kRunning && w.child) {
          waitpid(static_cast<pid_t>(w.pid.pid), nullptr, WNOHANG);  // reap it if it ended
        }
        w.state = Watched::State::kStopped;
        continue;
      }
      if (w.state == Watched::State::kRunning) {
        bool died = false;
        if (w.child) {
          int status = 0;
          if (waitpid(static_cast<pid_t>(w.pid.pid), &status, WNOHANG) ==
              static_cast<pid_t>(w.pid.pid)) {
            died = true;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
              SupervisorLog(
                  absl::StrCat(n.spec->id, ": exited cleanly (status 0); not ", "restarted"));
              fs::remove(PidPath(o, n));
              w.state = Watched::State::kStopped;
              continue;
            }
            w.last_exit = DescribeExit(status);
          }
        } else if (!w.pid.remote || now >= w.next_remote_check) {
          w.next_remote_check = now + std::chrono::seconds(2);  // ssh is slow
          if (!Alive(w.pid)) {
            died = true;
            w.last_exit = "died (exit status unknown: not a child of this supervisor)";
          }
        }
        if (!died) continue;
        const double up_s = std::chrono::duration<double>(now - w.started).count();
        const std::optional<Clock::duration> wait = w.policy.Died(now);
        if (!wait) {
          const std::string why = absl::StrFormat(
              "%s %s after %.1f s up; restarted %d times in the last %d s: gave up, it stays "
              "down (its log: %s; start it again with `odmoe-cluster scale` or down + up)",
              n.spec->id, w.last_exit, up_s, w.policy.restarts(now), o.restart_window,
              LogPath(o, n));
          SupervisorLog(why);
          std::ofstream(GaveUpPath(o, n)) << why << "\n";
          fs::remove(PidPath(o, n));  // its pid may soon name another process
          w.state = Watched::State::kStopped;
          w.pid = PidRecord();
          continue;
        }
        SupervisorLog(absl::StrFormat(
            "%s (pid %d) %s after %.1f s up; restarting it in %.1f s (restart %d of at most %d "
            "in %d s)",
            n.spec->id, w.pid.pid, w.last_exit, up_s, std::chrono::duration<double>(*wait).count(),
            w.policy.restarts(now) + 1, o.restarts, o.restart_window));
        w.state = Watched::State::kWaiting;
        w.next_start = now + *wait;
        continue;
      }
      // kWaiting: its pid file still names the dead process (status shows "(dead)").
      if (now < w.next_start) continue;
      std::ofstream(LogPath(o, n), std::ios::app) << "odmoe-cluster: " << Now() << " restarting "
                                                  << n.spec->id << " (it " << w.last_exit << ")\n";
      absl::StatusOr<PidRecord> started =
          n.spec->ssh.empty() ? StartLocal(o, n, true) : StartRemote(o, n, true);
      w.policy.Restarted(now);
      if (!started.ok()) {
        w.last_exit = absl::StrCat("could not be started: ", started.status().message());
        SupervisorLog(absl::StrCat(n.spec->id, ": ", w.last_exit));
        w.state = Watched::State::kRunning;  // counts as dying at once
        w.child = false;
        w.started = now;
        continue;
      }
      std::ofstream(PidPath(o, n))
          << (started->remote ? "ssh " + started->target + " " : "") << started->pid << "\n";
      SupervisorLog(absl::StrCat(n.spec->id, ": restarted, pid ", started->pid));
      w.state = Watched::State::kRunning;
      w.pid = *started;
      w.child = !started->remote;
      w.started = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  SupervisorLog(absl::StrCat("signal ", static_cast<int>(g_stop_signal), ": stopping every node"));
  fs::remove(SupervisorPidPath(o));
  StopAllNodes(o, t, false);
  SupervisorLog("cluster stopped");
  return 0;
}

}  // namespace odmoe::cluster_tool
