// GET /metrics in the Prometheus text format: every metric family carries
// "# HELP" and "# TYPE" exactly once, before its samples, and its samples stay
// together. Checked by a small format checker here (always) and by
// `promtool check metrics` where promtool is installed (scripts/setup.sh puts
// it in /usr/local/bin; ODMOE_PROMTOOL names another one).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "main_node/main_metrics.h"
#include "shell.h"
#include "test_cluster.h"

namespace odmoe::test {
namespace {

// What is wrong with an exposition, one line per problem (empty = fine).
std::vector<std::string> ExpositionProblems(const std::string& text) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> type;  // family -> its TYPE
  std::set<std::string> helped, sampled, finished;
  std::string current;  // the family whose samples came last
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto problem = [&](const std::string& what) {
    problems.push_back(absl::StrCat("line ", number, ": ", what, ": ", line));
  };
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (absl::StartsWith(line, "# HELP ") || absl::StartsWith(line, "# TYPE ")) {
      const bool is_help = line[2] == 'H';
      std::istringstream words(line.substr(7));
      std::string name, rest;
      words >> name;
      std::getline(words, rest);
      if (name.empty() || rest.size() < 2) problem("HELP or TYPE without a name and text");
      if (sampled.count(name)) problem(name + " is described after its samples");
      if (is_help && !helped.insert(name).second) problem("second HELP for " + name);
      if (!is_help) {
        const std::string t = rest.empty() ? "" : rest.substr(1);
        if (type.count(name)) problem("second TYPE for " + name);
        if (t != "counter" && t != "gauge" && t != "histogram" && t != "summary") {
          problem("unknown type '" + t + "'");
        }
        if (!helped.count(name)) problem("TYPE before HELP for " + name);
        if (t == "counter" && !absl::EndsWith(name, "_total")) {
          problem("counter " + name + " does not end in _total");
        }
        type[name] = t;
      }
      continue;
    }
    if (line[0] == '#') continue;  // a comment
    const size_t name_end = line.find_first_of("{ ");
    const std::string name = line.substr(0, name_end);
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!absl::EndsWith(name, suffix)) continue;
      const std::string base = name.substr(0, name.size() - std::string(suffix).size());
      if (type.count(base) && (type[base] == "histogram" || type[base] == "summary")) {
        family = base;
      }
    }
    if (!helped.count(family)) problem("no HELP before the samples of " + family);
    if (!type.count(family)) problem("no TYPE before the samples of " + family);
    if (family != current) {
      if (finished.count(family)) problem("the samples of " + family + " are not together");
      if (!current.empty()) finished.insert(current);
      current = family;
    }
    sampled.insert(family);
    double value = 0;
    const std::string v = line.substr(line.rfind(' ') + 1);
    if (name_end == std::string::npos ||
        !(absl::SimpleAtod(v, &value) || v == "+Inf" || v == "-Inf" || v == "NaN")) {
      problem("not a sample line");
    }
  }
  for (const std::string& name : helped) {
    if (!type.count(name)) problems.push_back("HELP without TYPE for " + name);
  }
  return problems;
}

// `promtool check metrics` over `text`: "" when promtool is not installed,
// else its exit code and output.
std::string Promtool(const std::string& text, int* exit_code) {
  const char* env = std::getenv("ODMOE_PROMTOOL");
  std::string promtool = env != nullptr ? env : "";
  if (promtool.empty()) {
    const ShellResult which = Sh("command -v promtool");
    if (which.exit_code != 0) return "";
    promtool = which.output.substr(0, which.output.find('\n'));
  }
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / absl::StrCat("odmoe_metrics_", getpid(), ".txt");
  std::ofstream(file) << text;
  const ShellResult r = Sh(promtool + " check metrics < " + file.string());
  std::filesystem::remove(file);
  *exit_code = r.exit_code;
  return absl::StrCat(promtool, " (exit ", r.exit_code, "): ", r.output);
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) absl::StrAppend(&out, l, "\n");
  return out;
}

// An exposition with something in every family MainMetrics writes.
std::string SampleExposition() {
  MainMetrics m(3);
  m.RequestDone("http", "ok");
  m.RequestDone("grpc", "invalid");
  ClusterGenerateResult r;
  r.result.stats.prompt_tokens = 5;
  r.result.stats.ttft_seconds = 0.02;
  r.result.output_ids = {1, 2, 3};
  r.experts.hits = 4;
  r.experts.misses = 1;
  r.experts.stall_per_layer = {0.5, 0.25, 0};
  m.Generation(r);
  m.ObserveInterToken(0.003);
  std::string workers;
  AppendMetricFamily(&workers, "odmoe_worker_up", "gauge", "Whether the worker answers.",
                     "odmoe_worker_up{worker=\"w0\"} 1\nodmoe_worker_up{worker=\"w1\"} 0\n");
  AppendMetricFamily(&workers, "odmoe_worker_loads_total", "counter", "Loads.", "");
  return m.Render(1, 2, workers);
}

}  // namespace

TEST_CASE("metrics: every family has HELP and TYPE once, samples together", "[metrics]") {
  const std::string text = SampleExposition();
  INFO(text);
  CHECK(Join(ExpositionProblems(text)).empty());
  CHECK(text.find("odmoe_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1") != std::string::npos);
  CHECK(text.find("odmoe_load_stall_seconds_total{layer=\"1\"} 0.25") != std::string::npos);
}

TEST_CASE("metrics: the format check finds what promtool would", "[metrics]") {
  const std::string good = SampleExposition();
  REQUIRE(ExpositionProblems(good).empty());
  auto without_line = [&](const std::string& start) {
    const size_t at = good.find(start);
    REQUIRE(at != std::string::npos);
    std::string text = good;
    return text.erase(at, text.find('\n', at) + 1 - at);
  };
  std::string m = Join(ExpositionProblems(without_line("# HELP odmoe_worker_up ")));
  CHECK(m.find("TYPE before HELP for odmoe_worker_up") != std::string::npos);
  CHECK(m.find("no HELP before the samples of odmoe_worker_up") != std::string::npos);
  m = Join(ExpositionProblems(without_line("# TYPE odmoe_inter_token_latency_seconds ")));
  CHECK(m.find("no TYPE before the samples of odmoe_inter_token_latency_seconds_bucket") !=
        std::string::npos);
  m = Join(ExpositionProblems(good + "# HELP odmoe_worker_up Again.\n"));
  CHECK(m.find("second HELP for odmoe_worker_up") != std::string::npos);
  m = Join(ExpositionProblems(good + "odmoe_requests_running 3\n"));
  CHECK(m.find("the samples of odmoe_requests_running are not together") != std::string::npos);
  m = Join(ExpositionProblems(good + "# HELP odmoe_x X.\n# TYPE odmoe_x counter\nodmoe_x 1\n"));
  CHECK(m.find("counter odmoe_x does not end in _total") != std::string::npos);
}

TEST_CASE("metrics: a running cluster's /metrics passes the check and promtool",
          "[metrics][cluster][http]") {
  ClusterConfig cfg;
  cfg.workers = 4;
  cfg.http = true;
  auto cluster = TestCluster::Start(cfg);
  REQUIRE(cluster.ok());
  httplib::Client cli("127.0.0.1", (*cluster)->main().http_port());
  cli.set_read_timeout(std::chrono::seconds(60));
  auto res = cli.Post("/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 4, "stream": true})",
                      "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  // The workers' series come from a snapshot the main node refreshes every
  // second (worker_metrics.h); the first is taken as the cluster becomes
  // ready, so they are there at once but for a slow first probe.
  for (int i = 0; i < 100; ++i) {
    res = cli.Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    if (res->body.find("odmoe_worker_up{worker=\"w3\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string& text = res->body;
  INFO(text);
  CHECK(Join(ExpositionProblems(text)).empty());
  // The per-worker families, each described once and sampled for every worker.
  for (const char* family :
       {"odmoe_worker_up", "odmoe_worker_memory_in_use_bytes", "odmoe_worker_bytes_loaded_total",
        "odmoe_worker_loads_total", "odmoe_worker_experts_held", "odmoe_worker_memory_peak_bytes",
        "odmoe_worker_memory_budget_bytes", "odmoe_worker_hits_total", "odmoe_worker_misses_total",
        "odmoe_worker_reloads_total", "odmoe_worker_load_stall_seconds_total",
        "odmoe_schedule_version", "odmoe_worker_groups_live"}) {
    INFO(family);
    CHECK(text.find(absl::StrCat("# HELP ", family, " ")) != std::string::npos);
    CHECK(text.find(absl::StrCat("# TYPE ", family, " ")) != std::string::npos);
    if (absl::StartsWith(family, "odmoe_worker_") &&
        family != std::string("odmoe_worker_groups_live")) {
      CHECK(text.find(absl::StrCat(family, "{worker=\"w3\"} ")) != std::string::npos);
    }
  }
  int exit_code = -1;
  const std::string promtool = Promtool(text, &exit_code);
  if (promtool.empty()) {
    WARN(
        "promtool is not installed (scripts/setup.sh installs it); `promtool check metrics` "
        "skipped, the format check above ran");
    return;
  }
  INFO(promtool);
  CHECK(exit_code == 0);
}

TEST_CASE("metrics: a request whose predictor stayed silent sets the last recall to 0",
          "[metrics]") {
  MainMetrics m(2);
  ClusterGenerateResult good;
  good.prediction = PredictionMode::kShadow;
  good.recall.overall = 1.0;
  good.recall.correct = 8;
  good.recall.slots = 8;
  m.Generation(good);
  CHECK(m.Render(0, 0, "").find("odmoe_prediction_recall_last 1.000000") != std::string::npos);
  // Shadow prediction, but no (token, layer) was ever predicted: recall 0, not 1.0 still.
  ClusterGenerateResult silent;
  silent.prediction = PredictionMode::kShadow;
  silent.recall.predictions_missing = 16;
  CHECK(CountsForRecall(silent));
  m.Generation(silent);
  CHECK(m.Render(0, 0, "").find("odmoe_prediction_recall_last 0.000000") != std::string::npos);
  // A request run without prediction says nothing about the predictor.
  ClusterGenerateResult none;
  none.recall.predictions_missing = 16;
  CHECK(!CountsForRecall(none));
  m.Generation(good);
  m.Generation(none);
  CHECK(m.Render(0, 0, "").find("odmoe_prediction_recall_last 1.000000") != std::string::npos);
}

}  // namespace odmoe::test
