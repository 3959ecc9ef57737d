// The topology's bounds and files, as hostile or mistaken topologies try
// them (issue 32, finding 8): every bound accepted at its edge and refused
// one past it, with an error naming the key, the value and the bound; every
// file the topology names refused at once when it is a FIFO, a directory or
// a device (a FIFO as `model:` used to block `odmoe-cluster up` and every
// daemon in open() forever).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "absl/strings/str_cat.h"
#include "test_paths.h"
#include "topology/topology.h"

namespace odmoe {
namespace {

namespace fs = std::filesystem;

std::string Model() { return test::SourcePath("models/tiny-mixtral-f16.gguf"); }

// `workers` workers on distinct loopback ports, in groups of `group_size`
// (0: the model's top-k), and `extra` top-level keys.
std::string WithWorkers(int workers, int group_size, const std::string& main_extra = "",
                        const std::string& extra = "") {
  std::string yaml =
      absl::StrCat("model: ", Model(), "\nprediction: none\n", extra,
                   "main: { id: main, address: \"127.0.0.1:7700\"", main_extra, " }\nworkers:\n");
  if (group_size > 0) absl::StrAppend(&yaml, "  group_size: ", group_size, "\n");
  absl::StrAppend(&yaml, "  nodes:\n");
  for (int i = 0; i < workers; ++i) {
    absl::StrAppend(&yaml, "    - { id: w", i, ", address: \"127.0.0.1:", 10000 + i, "\" }\n");
  }
  return yaml;
}

absl::Status Check(const std::string& yaml) {
  absl::StatusOr<Topology> t = ParseTopology(yaml, "hostile.yaml");
  if (!t.ok()) return t.status();
  return ValidateTopologyWithModel(*t);
}

// Expects `yaml` refused with a message that holds every one of `parts`.
void ExpectRefused(const std::string& yaml, const std::vector<std::string>& parts) {
  const absl::Status s = Check(yaml);
  INFO(s.message());
  REQUIRE(!s.ok());
  CHECK(s.message().substr(0, 13) == "hostile.yaml:");
  for (const std::string& part : parts) CHECK(s.message().find(part) != std::string::npos);
}

void ExpectAccepted(const std::string& yaml) {
  const absl::Status s = Check(yaml);
  INFO(s.message());
  CHECK(s.ok());
}

// A temporary directory, removed with what it holds.
class Dir {
 public:
  explicit Dir(const std::string& name)
      : path_(fs::temp_directory_path() / absl::StrCat("odmoe_", name, "_", getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Runs `check` with a bound: a check that blocks in open() on `fifo` fails
// the test instead of hanging it (the FIFO is then opened for writing, which
// lets the blocked reader go).
absl::Status Bounded(const std::string& fifo, const std::function<absl::Status()>& check) {
  std::future<absl::Status> f = std::async(std::launch::async, check);
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL("the check blocked on the FIFO " << fifo << " for 20 s");
  }
  return f.get();
}

}  // namespace

TEST_CASE("topology bounds: workers, groups and group size at their edges", "[topology][bounds]") {
  // 1024 workers in 256 groups of 4: both at the bound.
  ExpectAccepted(WithWorkers(kMaxWorkers, 4));
  // One group more than the bound: 1028 workers are past kMaxWorkers first.
  ExpectRefused(WithWorkers(kMaxWorkers + 4, 4), {"workers.nodes", "1028 workers", "1024"});
  // 10,000 workers (finding 8: `up` started 181 of them in 60 s before failing).
  ExpectRefused(WithWorkers(10000, 2), {"workers.nodes", "10000 workers", "at most 1024"});
  // Groups: 256 of one worker, then 257.
  ExpectAccepted(WithWorkers(kMaxGroups, 1));
  ExpectRefused(WithWorkers(kMaxGroups + 1, 1),
                {"workers.nodes", "257 groups", "at most 256 groups"});
  // The default group size (the model's top-k, 2) counts too: 514 workers = 257 groups.
  ExpectAccepted(WithWorkers(2 * kMaxGroups, 0));
  ExpectRefused(WithWorkers(2 * kMaxGroups + 2, 0), {"workers.nodes", "257 groups"});
  // Group size: 64, then 65.
  ExpectAccepted(WithWorkers(kMaxGroupSize, kMaxGroupSize));
  ExpectRefused(WithWorkers(kMaxGroupSize + 1, kMaxGroupSize + 1),
                {"workers.group_size", "'65'", "[1, 64]"});
}

TEST_CASE("topology bounds: rows, queue and run-ahead at their edges", "[topology][bounds]") {
  ExpectAccepted(WithWorkers(2, 0, ", batch: 4096"));
  ExpectRefused(WithWorkers(2, 0, ", batch: 4097"), {"main.batch", "'4097'", "[1, 4096]"});
  ExpectAccepted(WithWorkers(2, 0, ", max_queue: 4096"));
  ExpectRefused(WithWorkers(2, 0, ", max_queue: 4097"), {"main.max_queue", "'4097'", "[0, 4096]"});
  ExpectRefused(WithWorkers(2, 0, ", max_queue: 1048576"), {"main.max_queue", "[0, 4096]"});
  ExpectAccepted(WithWorkers(2, 0, "", "prefill: { mini_batch: 4096 }\n"));
  ExpectRefused(WithWorkers(2, 0, "", "prefill: { mini_batch: 4097 }\n"),
                {"prefill.mini_batch", "'4097'", "[1, 4096]"});
  const auto shadow = [](const std::string& keys) {
    std::string yaml = WithWorkers(2, 0);
    yaml.replace(yaml.find("prediction: none"), 16, "prediction: shadow");
    return yaml + "shadow: { id: s, address: \"127.0.0.1:7701\"" + keys + " }\n";
  };
  ExpectAccepted(shadow(", max_run_ahead: 1024"));
  ExpectRefused(shadow(", max_run_ahead: 1025"), {"shadow.max_run_ahead", "'1025'", "[1, 1024]"});
  // Values past any integer: refused with the bound, never wrapped.
  ExpectRefused(WithWorkers(2, 0, ", batch: 99999999999999999999"), {"main.batch", "[1, 4096]"});
  ExpectRefused(WithWorkers(2, 0, ", max_queue: 1e18"), {"main.max_queue", "'1e18'"});
}

TEST_CASE("topology bounds: every shipped topology is within them", "[topology][bounds]") {
  for (const auto& entry : fs::directory_iterator(test::SourcePath("deploy"))) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    const absl::StatusOr<Topology> t = LoadTopology(entry.path().string());
    INFO(t.status().message());
    CHECK(t.ok());
  }
}

TEST_CASE("topology files: a FIFO as the model is refused at once, never opened",
          "[topology][bounds][files]") {
  const Dir dir("topology_fifo");
  const std::string fifo = dir / "model.gguf";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string yaml = WithWorkers(2, 0);
  std::string with_fifo = yaml;
  with_fifo.replace(with_fifo.find(Model()), Model().size(), fifo);
  std::ofstream(dir / "t.yaml") << with_fifo;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s = Bounded(fifo, [&] { return LoadTopology(dir / "t.yaml").status(); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(s.message());
  CHECK(!s.ok());
  CHECK(s.message().find("model: " + fifo + " is a FIFO (named pipe), not a regular file") !=
        std::string::npos);
  CHECK(seconds < 5);
  // The topology file itself a FIFO.
  const std::string fifo_yaml = dir / "fifo.yaml";
  REQUIRE(mkfifo(fifo_yaml.c_str(), 0600) == 0);
  const absl::Status t = Bounded(fifo_yaml, [&] { return LoadTopology(fifo_yaml).status(); });
  INFO(t.message());
  CHECK(!t.ok());
  CHECK(t.message().find("is a FIFO (named pipe), not a regular file") != std::string::npos);
}

TEST_CASE("topology files: every path the topology names must be a regular file",
          "[topology][bounds][files]") {
  const Dir dir("topology_files");
  const std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directories(dir / "a-directory");
  // {key in the error, the topology with that path}.
  const std::string base = WithWorkers(2, 0);
  const auto top = [&](const std::string& keys) { return keys + base; };
  struct Case {
    std::string key, yaml, path;
  };
  std::string shadow_yaml = base;
  shadow_yaml.replace(shadow_yaml.find("prediction: none"), 16, "prediction: shadow");
  const std::vector<Case> cases = {
      {"model", absl::StrCat("model: ", fifo, "\n", base.substr(base.find('\n') + 1)), fifo},
      {"model",
       absl::StrCat("model: ", dir / "a-directory", "\n", base.substr(base.find('\n') + 1)),
       dir / "a-directory"},
      {"model", absl::StrCat("model: /dev/null\n", base.substr(base.find('\n') + 1)), "/dev/null"},
      {"shadow.model",
       shadow_yaml + "shadow: { id: s, address: \"127.0.0.1:7701\", model: " + fifo + " }\n", fifo},
      {"node_tls.ca", top("node_tls: { ca: " + fifo + ", cert: c.pem, key: k.pem }\n"), fifo},
      // One certificate per node: the file of one node (w1) is the FIFO.
      {"node_tls.cert",
       top("node_tls: { ca: ca.pem, cert: \"" + (dir / "{id}") + "\", key: \"k-{id}.pem\" }\n"),
       ""},
      {"main.tls.key", "", fifo},
      {"cluster_secret_file", top("cluster_secret_file: " + fifo + "\n"), fifo},
  };
  // The per-node certificate case: w1's certificate is a FIFO named "w1".
  REQUIRE(mkfifo((dir / "w1").c_str(), 0600) == 0);
  for (Case c : cases) {
    if (c.key == "main.tls.key") {
      c.yaml = WithWorkers(
          2, 0,
          ", http: \"127.0.0.1:8080\", tls: { cert: " + (dir / "a.pem") + ", key: " + fifo + " }");
    }
    INFO(c.key << "\n" << c.yaml.substr(0, 400));
    const absl::Status s =
        Bounded(c.path.empty() ? dir / "w1" : c.path, [&] { return Check(c.yaml); });
    INFO(s.message());
    REQUIRE(!s.ok());
    CHECK(s.message().find("hostile.yaml: " + c.key + ": ") == 0);
    CHECK(s.message().find("not a regular file") != std::string::npos);
  }
  // Files that are not there yet (made by `odmoe-cluster certs` or `up`) are fine here.
  ExpectAccepted(top("node_tls: { ca: " + (dir / "ca.pem") + ", cert: \"" + (dir / "c-{id}.pem") +
                     "\", key: \"" + (dir / "k-{id}.pem") + "\" }\n"));
}

}  // namespace odmoe
