// odmoe-bench as a user runs it: bad flags get one clear message and exit 2;
// a small real run starts the deployments as processes, checks every
// cluster's tokens against the reference engine, and writes results.json,
// summary.md and a Perfetto trace with spans of every node.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "nlohmann/json.hpp"
#include "shell.h"
#include "test_paths.h"

namespace odmoe {
namespace {

std::string Bench() { return test::BinaryPath("bin/odmoe-bench"); }

TEST_CASE("bench cli: bad flags exit 2 with the reason", "[bench]") {
  auto expect = [](const std::string& args, const std::string& what) {
    const test::ShellResult r = test::Sh(Bench() + " " + args);
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(what) != std::string::npos);
  };
  expect("--experiments deployments,magic", "unknown name 'magic'");
  expect("--deployments odmoe,cloud", "unknown name 'cloud'");
  expect("--configs 16by64", "not PROMPTxOUTPUT");
  expect("--periods 1,0", "--periods: '0' is not an integer 1..4096");
  expect("--clients 1,300", "--clients: '300' is not an integer 1..256");
  expect("--concurrency-tokens 1", "token counts >= 2");
  expect("--load-bandwidth quick", "not a rate");
  expect("--sweep 4,-1", "not a ratio");
  expect("--prompts 0", "must be >= 1");
  expect("--frobnicate", "frobnicate");
  const test::ShellResult help = test::Sh(Bench() + " --help");
  CHECK(help.exit_code == 0);
  CHECK(help.output.find("--load-ratio") != std::string::npos);
}

TEST_CASE("bench cli: a small run of real deployments", "[bench][processes]") {
  const std::string out =
      (std::filesystem::temp_directory_path() / "odmoe_bench_cli_test").string();
  std::filesystem::remove_all(out);
  const test::ShellResult r = test::Sh(
      Bench() + " --topology " + test::SourcePath("deploy/testbed-10.yaml") +
      " --heldout " + test::SourcePath("tests/data/heldout.txt") +
      " --experiments deployments,timing --configs 16x12 --prompts 1 --load-ratio 64"
      " --port-base 7940 --out " + out);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out + "/results.json");
  REQUIRE(in);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["emulation"]["load_emulated"] == true);
  CHECK(j["emulation"]["load_over_compute"].get<double>() == Approx(64).epsilon(0.01));
  const nlohmann::json& d = j["deployments"]["results"];
  for (const std::string name : {"odmoe", "none", "random", "resident", "lru", "reference"}) {
    INFO(name);
    REQUIRE(d.contains(name));
    CHECK(d[name]["16x12"]["exact"] == true);
    CHECK(d[name]["16x12"]["decode_tps"].get<double>() > 0);
  }
  CHECK(d["odmoe"]["16x12"]["recall"].get<double>() > 0.5);
  CHECK(d["resident"]["16x12"]["misses"].get<double>() == 0);
  CHECK(d["none"]["16x12"]["hits"].get<double>() == 0);
  CHECK(d["none"]["16x12"]["bytes_loaded_per_token"].get<double>() > 0);
  CHECK(d["odmoe"]["16x12"]["network_bytes_per_token"].get<double>() > 0);
  CHECK(j["deployments"]["headline"].contains("odmoe_over_resident"));
  // Peak memory: on-demand workers never held more than one expert.
  int workers = 0;
  for (const auto& n : j["deployments"]["memory"]["odmoe"]) {
    CHECK(n["process_peak_rss_bytes"].get<double>() > 0);
    if (n["role"] == "worker") {
      ++workers;
      CHECK(n["experts_held_peak"].get<double>() == 1);
    }
  }
  CHECK(workers == 8);
  // The timing diagram has spans from the main node, the shadow and workers.
  const nlohmann::json& t = j["timing"]["odmoe"];
  CHECK(t["t_main_us"].get<double>() > 0);
  CHECK(t["t_maxload_us"].get<double>() > 0);
  std::ifstream trace_in(t["trace_file"].get<std::string>());
  REQUIRE(trace_in);
  const nlohmann::json trace = nlohmann::json::parse(trace_in);
  std::set<std::string> cats;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") cats.insert(e["cat"].get<std::string>());
  }
  // The main node and the workers compute every token, so their spans are in
  // the window (tokens 8..10). The shadow skips an iteration the main node has
  // already passed (a loaded machine), so its spans are checked over the run.
  for (const std::string c : {"M", "EC", "experts"}) {
    INFO(c);
    CHECK(cats.count(c) == 1);
  }
  bool shadow_seen = false;
  for (const auto& n : t["clocks"]) {
    if (n["node"] == "shadow") {
      shadow_seen = true;
      CHECK(n["spans"].get<double>() > 0);
    }
  }
  CHECK(shadow_seen);
  std::ifstream md(out + "/summary.md");
  CHECK(md);
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace odmoe
