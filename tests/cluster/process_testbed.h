// The ten-node testbed as processes, for tests: a topology on free loopback
// ports written into a fresh temporary directory, started with
// `odmoe-cluster up` and stopped with `odmoe-cluster down`. The destructor
// runs `down` and removes the directory, so a failed REQUIRE leaves no daemon
// and no file behind.
//
//   test::ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_tb");
//   const test::ShellResult up = bed.Up();
//   REQUIRE(up.exit_code == 0);
//   Sh(Bin("odmoe") + " complete --main " + bed.main_address() + " -n 8 hello");
//   // leaving the scope: down, then the directory (topology, logs, pid files) is removed
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "shell.h"
#include "test_paths.h"

namespace odmoe::test {

/// A loopback port nobody listens on right now.
inline int FreePort() {
  // Below the kernel's ephemeral range (32768-60999 by default): a port taken
  // from that range by binding port 0 can be handed to some other process's
  // outgoing connection before the daemon binds it, which made parallel
  // testbeds fail now and then. Each process starts at its own offset.
  constexpr int kLow = 20000, kHigh = 32000;
  static std::atomic<int> next{kLow + static_cast<int>(getpid() * 7919 % (kHigh - kLow))};
  for (int tries = 0; tries < kHigh - kLow; ++tries) {
    const int port = kLow + (next.fetch_add(1) - kLow) % (kHigh - kLow);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    if (free) return port;
  }
  FAIL("no free loopback port in 20000-31999");
  return 0;
}

/// A built executable: Bin("odmoe-run").
inline std::string Bin(const std::string& name) { return BinaryPath("bin/" + name); }

/// A fresh directory under the system's temporary directory, named
/// `<prefix>_<pid>`, removed with everything in it when this goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix)
      : path_(std::filesystem::temp_directory_path() / absl::StrCat(prefix, "_", getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// What the topology holds besides the model.
struct TestbedSpec {
  int workers = 8;
  bool shadow = true;  // prediction: shadow, the shadow quantized to q8_0; else prediction: none
  std::string worker_ssh;   // non-empty: worker i gets `ssh: <worker_ssh><i>`
  std::string cluster_env;  // put before odmoe-cluster, e.g. "ODMOE_SSH=/x/fake-ssh "
  std::string main_extra;   // more keys of the main section, e.g. "  api_key: k\n"
  std::string top_extra;    // more top-level keys, e.g. "node_tls: {...}\n"
  std::string up_flags;     // after `up TOPOLOGY`, e.g. "--restarts 0" (no supervisor)
};

class ProcessTestbed {
 public:
  /// Writes `<dir>/testbed.yaml` (dir: a TempDir named after `dir_prefix`);
  /// logs and pid files go to `<dir>/run`.
  ProcessTestbed(const std::string& model, const std::string& dir_prefix,
                 const TestbedSpec& spec = {})
      : dir_(dir_prefix), main_port_(FreePort()) {
    std::string yaml =
        absl::StrCat("model: ", model, "\nprediction: ", spec.shadow ? "shadow" : "none", "\n",
                     spec.top_extra, "main:\n  id: main\n  address: 127.0.0.1:", main_port_,
                     "\n", spec.main_extra);
    if (spec.shadow) {
      absl::StrAppend(&yaml, "shadow:\n  id: shadow\n  address: 127.0.0.1:", FreePort(),
                      "\n  quantization: q8_0\n");
    }
    absl::StrAppend(&yaml, "workers:\n  nodes:\n");
    for (int i = 0; i < spec.workers; ++i) {
      absl::StrAppend(&yaml, "    - { id: w", i, ", address: \"127.0.0.1:", FreePort(), "\"");
      if (!spec.worker_ssh.empty()) absl::StrAppend(&yaml, ", ssh: ", spec.worker_ssh, i);
      absl::StrAppend(&yaml, " }\n");
    }
    topology_ = dir_ / "testbed.yaml";
    std::ofstream(topology_) << yaml;
    cluster_ = spec.cluster_env + Bin("odmoe-cluster") + " --run-dir " + run_dir() + " ";
    up_flags_ = spec.up_flags;
  }
  ~ProcessTestbed() {
    if (up_) Down();
  }
  ProcessTestbed(const ProcessTestbed&) = delete;
  ProcessTestbed& operator=(const ProcessTestbed&) = delete;

  /// `odmoe-cluster up`: every node started and ready (exit 0), or none left running.
  ShellResult Up() {
    up_ = true;  // a partial start is stopped by the destructor too
    return Sh(cluster_ + "up " + topology_ + " " + up_flags_);
  }
  /// `odmoe-cluster down`: every node drained and stopped.
  ShellResult Down() {
    up_ = false;
    return Sh(cluster_ + "down " + topology_);
  }
  /// `odmoe-cluster scale --workers N`.
  ShellResult Scale(int workers) const {
    return Sh(cluster_ + "scale " + topology_ + " --workers " + std::to_string(workers));
  }
  /// `odmoe-cluster status`, with `flags` such as "--verbose".
  ShellResult Status(const std::string& flags = "") const {
    return Sh(cluster_ + "status " + topology_ + " " + flags);
  }

  int main_port() const { return main_port_; }
  std::string main_address() const { return absl::StrCat("127.0.0.1:", main_port_); }
  const std::string& topology() const { return topology_; }
  std::string run_dir() const { return dir_ / "run"; }
  /// The directory itself, for the test's own files.
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  int main_port_;
  std::string topology_;
  std::string cluster_;
  std::string up_flags_;
  bool up_ = false;
};

}  // namespace odmoe::test
