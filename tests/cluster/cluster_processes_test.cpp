// The testbed as a user runs it: every node its own process, started by
// odmoe-cluster from a YAML topology, a completion through `odmoe complete`,
// status, and a clean stop on SIGTERM.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cluster/peer_auth.h"
#include "cluster/process_testbed.h"
#include "shell.h"
#include "test_paths.h"

namespace odmoe::test {

using Result = ShellResult;

TEST_CASE("processes: ten-node testbed up, complete, status, down", "[cluster][processes]") {
  // Without the supervisor: the killed worker and shadow stay down, and the
  // cluster serves without them (supervisor_test.cpp restarts them).
  TestbedSpec spec;
  spec.up_flags = "--restarts 0";
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_testbed", spec);
  const TempDir& dir = bed.dir();
  const std::string run_dir = bed.run_dir();
  const int main_port = bed.main_port();

  const Result up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);

  const std::string prompt = "The meaning of life is";
  const std::string stats_file = dir / "stats.txt";
  const Result done =
      Sh("(" + Bin("odmoe") + " complete --main 127.0.0.1:" + std::to_string(main_port) +
         " -n 24 --ignore-eos --stats \"" + prompt + "\" 2>" + stats_file + ")");
  std::ifstream stats_in(stats_file);
  const std::string stats((std::istreambuf_iterator<char>(stats_in)), {});
  const Result ref =
      Sh("(" + Bin("odmoe-run") + " --model " + SourcePath("models/tiny-mixtral-f16.gguf") +
         " -n 24 --ignore-eos " + "--prompt \"" + prompt + "\" 2>/dev/null)");
  INFO(done.output);
  CHECK(done.exit_code == 0);
  // odmoe-run echoes the prompt; both end the text with a newline.
  CHECK(prompt + done.output == ref.output);
  CHECK(stats.find("recall") != std::string::npos);
  CHECK(stats.find("generated 24") != std::string::npos);

  // A worker killed outright while a long completion runs: the request still
  // ends with the single-process engine's text.
  const std::string long_prompt = "It is a truth universally acknowledged";
  const std::string complete = Bin("odmoe") +
                               " complete --main 127.0.0.1:" + std::to_string(main_port) +
                               " -n 150 --ignore-eos \"" + long_prompt + "\" 2>/dev/null";
  std::string victim;
  std::ifstream(run_dir + "/w5.pid") >> victim;
  const Result killed = Sh("(sleep 0.15; kill -9 " + victim + ") & (" + complete + ")");
  const Result long_ref =
      Sh("(" + Bin("odmoe-run") + " --model " + SourcePath("models/tiny-mixtral-f16.gguf") +
         " -n 150 --ignore-eos --prompt \"" + long_prompt + "\" 2>/dev/null)");
  CHECK(killed.exit_code == 0);
  CHECK(long_prompt + killed.output == long_ref.output);

  // The shadow killed outright: the cluster keeps serving, without prediction.
  std::string shadow_pid;
  std::ifstream(run_dir + "/shadow.pid") >> shadow_pid;
  REQUIRE(Sh("kill -9 " + shadow_pid).exit_code == 0);
  for (int i = 0; i < 100; ++i) {  // the main node notices the broken stream
    if (bed.Status("--verbose").output.find("shadow_connected=no") != std::string::npos) {
      break;
    }
    usleep(50 * 1000);
  }
  const std::string no_shadow_stats = dir / "no_shadow.txt";
  const Result without =
      Sh("(" + Bin("odmoe") + " complete --main 127.0.0.1:" + std::to_string(main_port) +
         " -n 24 --ignore-eos --stats \"" + prompt + "\" 2>" + no_shadow_stats + ")");
  std::ifstream no_shadow_in(no_shadow_stats);
  const std::string no_shadow((std::istreambuf_iterator<char>(no_shadow_in)), {});
  INFO(no_shadow);
  CHECK(without.exit_code == 0);
  CHECK(prompt + without.output == ref.output);
  CHECK(no_shadow.find("prediction none") != std::string::npos);

  const Result status = bed.Status();
  INFO(status.output);
  CHECK(status.exit_code == 1);  // w5 is down
  CHECK(status.output.find("w7") != std::string::npos);
  CHECK(status.output.find("live_groups=0,1,3") != std::string::npos);
  CHECK(status.output.find("ready") != std::string::npos);

  const Result down = bed.Down();
  INFO(down.output);
  CHECK(down.exit_code == 0);
  // Every daemon drained and stopped on SIGTERM.
  for (const std::string id : {"main", "w0", "w7"}) {  // (w5 and the shadow were killed)
    std::ifstream log(run_dir + "/" + id + ".log");
    const std::string text((std::istreambuf_iterator<char>(log)), {});
    INFO(id << " log:\n" << text);
    CHECK(text.find("stopped") != std::string::npos);
  }
  CHECK(Sh(Bin("odmoe") + " complete --main 127.0.0.1:" + std::to_string(main_port) + " hi")
            .exit_code != 0);
}

TEST_CASE("processes: nodes on other hosts start and stop over ssh", "[cluster][processes]") {
  // A stand-in for ssh that runs the remote command here, with the run
  // directory moved to another one (the "remote host's"): what odmoe-cluster
  // sends over ssh is exercised for real, and the remote nodes find the
  // cluster secret only if odmoe-cluster copied it there.
  const TempDir dir("odmoe_ssh");
  const std::string fake_ssh = dir / "fake-ssh";
  TestbedSpec spec;
  spec.workers = 2;
  spec.shadow = false;
  spec.worker_ssh = "tester@edge";
  spec.cluster_env = "ODMOE_SSH=" + fake_ssh + " ";
  // Per-node certificates inside the run directory, so that the remote nodes
  // find theirs only if odmoe-cluster copied them too.
  spec.top_extra =
      "node_tls: { ca: run/certs/ca.pem, cert: \"run/certs/{id}.pem\", "
      "key: \"run/certs/{id}-key.pem\" }\n";
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_ssh_testbed", spec);
  REQUIRE(Sh(Bin("odmoe-cluster") + " certs " + bed.topology()).exit_code == 0);
  const std::string remote_run = dir / "remote-run";
  std::ofstream(fake_ssh) << "#!/bin/sh\necho \"$1\" >> " << (dir / "targets")
                          << "\nshift\nexec sh -c \"$(printf '%s' \"$*\" | sed 's#"
                          << bed.run_dir() << "#" << remote_run << "#g')\"\n";
  std::filesystem::permissions(fake_ssh, std::filesystem::perms::owner_all);
  const Result up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  // The generated secret reached the remote run directory, owner-only.
  std::ifstream local_secret(bed.run_dir() + "/cluster.secret");
  std::ifstream remote_secret(remote_run + "/cluster.secret");
  const std::string local_text((std::istreambuf_iterator<char>(local_secret)), {});
  const std::string remote_text((std::istreambuf_iterator<char>(remote_secret)), {});
  CHECK(!local_text.empty());
  CHECK(remote_text == local_text);
  struct stat st {};
  REQUIRE(stat((remote_run + "/cluster.secret").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(std::filesystem::exists(remote_run + "/w1.log"));  // the node ran "there"
  // Each remote node got the CA and its own certificate and key, nothing else.
  CHECK(std::filesystem::exists(remote_run + "/certs/ca.pem"));
  CHECK(std::filesystem::exists(remote_run + "/certs/w1.pem"));
  REQUIRE(stat((remote_run + "/certs/w1-key.pem").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(!std::filesystem::exists(remote_run + "/certs/ca-key.pem"));
  CHECK(!std::filesystem::exists(remote_run + "/certs/main-key.pem"));
  const Result done = Sh(Bin("odmoe") + " complete --topology " + bed.topology() + " -n 4 hello");
  CHECK(done.exit_code == 0);
  std::ifstream pid_file(bed.run_dir() + "/w1.pid");
  std::string first;
  pid_file >> first;
  CHECK(first == "ssh");
  CHECK(bed.Down().exit_code == 0);
  std::ifstream targets(dir / "targets");
  const std::string used((std::istreambuf_iterator<char>(targets)), {});
  CHECK(used.find("tester@edge0") != std::string::npos);
  CHECK(used.find("tester@edge1") != std::string::npos);
  CHECK(!std::filesystem::exists(bed.run_dir() + "/w0.pid"));
}

TEST_CASE("processes: odmoe-cluster up generates the cluster secret, scale signs with it",
          "[cluster][processes][scaling][auth]") {
  TestbedSpec spec;
  spec.workers = 4;
  spec.shadow = false;
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_scale_testbed", spec);
  const Result up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::string secret = bed.run_dir() + "/cluster.secret";
  struct stat st {};
  REQUIRE(stat(secret.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(LoadClusterSecret(secret).ok());
  Result r = bed.Scale(2);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("scaled to 2 workers (1 group of 2): 0 started, 2 stopped") !=
        std::string::npos);
  CHECK(bed.Status("--verbose").output.find("active_workers=2") != std::string::npos);
  // The same cluster from a run directory with another secret: refused, nothing changes.
  const std::string other = bed.dir() / "other-run";
  std::filesystem::create_directories(other);
  REQUIRE(WriteNewClusterSecret(other + "/cluster.secret").ok());
  for (const auto& f : std::filesystem::directory_iterator(bed.run_dir())) {
    if (f.path().extension() == ".pid") {
      std::filesystem::copy_file(f.path(), other + "/" + f.path().filename().string());
    }
  }
  r = Sh(Bin("odmoe-cluster") + " scale " + bed.topology() + " --workers 2 --run-dir " + other);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("not signed with this cluster's secret") != std::string::npos);
  CHECK(bed.Status("--verbose").output.find("active_workers=2") != std::string::npos);
  // Back to every worker: the two stopped ones start again and take layers.
  r = bed.Scale(4);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("2 started, 0 stopped") != std::string::npos);
  CHECK(bed.Status("--verbose").output.find("active_workers=4") != std::string::npos);
  const Result done = Sh(Bin("odmoe") + " complete --main " + bed.main_address() + " -n 4 hello");
  CHECK(done.exit_code == 0);
}

TEST_CASE("processes: odmoe-cluster refuses bad input", "[cluster]") {
  Result r = Sh(Bin("odmoe-cluster") + " up /nonexistent/t.yaml");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("odmoe-cluster: error: /nonexistent/t.yaml") != std::string::npos);
  // A bad command line exits 2, as in every odmoe binary (CliArgs::kUsageExit).
  r = Sh(Bin("odmoe-cluster") + " launch " + SourcePath("deploy/testbed-10.yaml"));
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("unknown command 'launch'") != std::string::npos);
  r = Sh(Bin("odmoe-cluster") + " up");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("expected a command and a topology") != std::string::npos);
  // Nodes on a LAN address without node_tls or insecure: true: refused before anything starts.
  const TempDir lan("odmoe_lan");
  std::ofstream(lan / "lan.yaml") << "model: " << SourcePath("models/tiny-mixtral-f16.gguf")
                                  << "\nprediction: none\nmain: { id: main, address: "
                                     "\"10.0.0.1:7700\" }\nworkers:\n  nodes:\n"
                                     "    - { id: w0, address: \"10.0.0.2:7710\" }\n"
                                     "    - { id: w1, address: \"10.0.0.3:7710\" }\n";
  for (const std::string& command :
       {Bin("odmoe-cluster") + " up " + (lan / "lan.yaml") + " --run-dir " + (lan / "run"),
        Bin("odmoe-main") + " --topology " + (lan / "lan.yaml") + " --id main"}) {
    r = Sh(command);
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("main.address: '10.0.0.1:7700' is not a loopback address") !=
          std::string::npos);
    CHECK(r.output.find("`insecure: true`") != std::string::npos);
  }
  CHECK(!std::filesystem::exists(lan / "run"));
  // Fake daemons that die at once: up reports the log tail and fails.
  const TempDir dir("odmoe_fakebin");
  for (const char* name : {"odmoe-worker", "odmoe-shadow", "odmoe-main"}) {
    const std::string path = dir / name;
    std::ofstream(path) << "#!/bin/sh\necho 'fake daemon: cannot start' >&2\nexit 3\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  r = Sh(Bin("odmoe-cluster") + " up " + SourcePath("deploy/testbed-10.yaml") + " --bin-dir " +
         dir.path().string() + " --run-dir " + (dir / "run"));
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("exited during start-up") != std::string::npos);
  CHECK(r.output.find("fake daemon: cannot start") != std::string::npos);
  // down on a run directory with nothing running is fine.
  CHECK(Sh(Bin("odmoe-cluster") + " down " + SourcePath("deploy/testbed-10.yaml") + " --run-dir " +
           (dir / "empty"))
            .exit_code == 0);
}

TEST_CASE("processes: daemons refuse bad start-up input with one clear line", "[cluster]") {
  const std::string model = SourcePath("models/tiny-mixtral-f16.gguf");
  Result r = Sh(Bin("odmoe-worker") + " --topology /nonexistent/topology.yaml --id w0");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("odmoe-worker: error:") != std::string::npos);
  CHECK(r.output.find("/nonexistent/topology.yaml") != std::string::npos);
  r = Sh(Bin("odmoe-main") + " --id main");
  CHECK(r.exit_code == 2);  // a usage error
  CHECK(r.output.find("--topology") != std::string::npos);
  r = Sh(Bin("odmoe-shadow") + " --topology " + SourcePath("deploy/testbed-10.yaml") +
         " --id nobody");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("nobody") != std::string::npos);
  r = Sh(Bin("odmoe") + " complete --main 127.0.0.1:1 hi");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("odmoe: error:") != std::string::npos);
  r = Sh(Bin("odmoe") + " frobnicate");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("unknown command") != std::string::npos);
  // A daemon started by hand from a topology without a secret says what it needs.
  r = Sh(Bin("odmoe-worker") + " --topology " + SourcePath("deploy/testbed-10.yaml") +
         " --id w0");
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("cluster_secret_file") != std::string::npos);
  CHECK(r.output.find("--cluster-secret-file") != std::string::npos);
}

TEST_CASE("processes: a worker that hangs (a timeout, no disconnect) takes its group out of "
          "health until it answers again",
          "[cluster][processes][failures]") {
  TestbedSpec spec;
  spec.workers = 2;  // one group: when it is out, nothing can serve
  spec.shadow = false;
  spec.main_extra = "  worker_timeout_ms: 1000\n";
  ProcessTestbed bed(SourcePath("models/tiny-mixtral-f16.gguf"), "odmoe_hang_testbed", spec);
  const Result up = bed.Up();
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::string complete =
      Bin("odmoe") + " complete --main " + bed.main_address() + " -n 4 hello";
  REQUIRE(Sh(complete).exit_code == 0);
  long pid = 0;
  std::ifstream(bed.run_dir() + "/w0.pid") >> pid;
  REQUIRE(pid > 0);
  // Stopped, not dead: its TCP connections stay up, it just never answers.
  REQUIRE(kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
  const Result failed = Sh(complete);
  CHECK(failed.exit_code != 0);
  Result status = bed.Status("--verbose");
  INFO(status.output);
  CHECK(status.exit_code == 1);
  CHECK(status.output.find("serving=no") != std::string::npos);
  CHECK(status.output.find("health=unavailable") != std::string::npos);
  REQUIRE(kill(static_cast<pid_t>(pid), SIGCONT) == 0);
  // Back within a few reconnect rounds and the group's quarantine.
  for (int i = 0; i < 100; ++i) {
    status = bed.Status("--verbose");
    if (status.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(status.output.find("health=ok") != std::string::npos);
  CHECK(Sh(complete).exit_code == 0);
}

}  // namespace odmoe::test
