// odmoe-bench: the OD-MoE paper's evaluation (§4) on our own cluster, in one
// command. Starts each deployment from a topology as real processes (or
// drives a running cluster with --attach), runs the paper's workload (batch
// 1, greedy, Table 2's prompt / output lengths, prompts from held-out text),
// and writes results.json, summary.md, PNG plots and Perfetto traces into
// the output directory. Every cluster request's tokens are compared with the
// single-process reference engine's.
//
//   odmoe-bench                                  # everything, deploy/testbed-10.yaml
//   odmoe-bench --quick                          # under 5 minutes on 2 cores
//   odmoe-bench --experiments deployments,timing --load-ratio 8
//   odmoe-bench --attach --topology my.yaml      # a cluster that already runs
//
// Expert loads are capped (an EMULATED slow link, see docs/benchmarks.md) so
// that one load takes --load-ratio times the expert's compute time, unless
// --load-bandwidth gives the rate; --load-ratio 0 turns the cap off.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/experiments.h"
#include "bench/plots.h"
#include "bench/report.h"
#include "util/cli_args.h"
#include "util/logging.h"

namespace fs = std::filesystem;

namespace odmoe::bench {
namespace {

int Fail(const std::string& message, int code = 1) {
  std::cerr << "odmoe-bench: error: " << message << "\n";
  return code;
}

absl::StatusOr<std::vector<BenchConfig>> ParseConfigs(const std::string& text) {
  std::vector<BenchConfig> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(item, 'x');
    BenchConfig c;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &c.prompt_tokens) ||
        !absl::SimpleAtoi(parts[1], &c.output_tokens) || c.prompt_tokens < 2 ||
        c.output_tokens < 2 || c.prompt_tokens > 4096 || c.output_tokens > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--configs: '", std::string(item),
                       "' is not PROMPTxOUTPUT (expected e.g. 16x64,128x256; each 2..4096)"));
    }
    out.push_back(c);
  }
  if (out.empty()) return absl::InvalidArgumentError("--configs is empty");
  return out;
}

// A delay as the topology writes one (250us, 1.5ms, 0), for flag `flag`.
absl::StatusOr<int64_t> ParseDelayUs(const std::string& flag, const std::string& text) {
  absl::StatusOr<Topology> probe = ParseTopology(
      "wire: { emulated_delay: \"" + text +
          "\" }\nmain: { id: m, address: 127.0.0.1:1 }\n"
          "prediction: none\nworkers: { nodes: [ { id: w, address: 127.0.0.1:2 } ] }\nmodel: x\n",
      flag);
  if (!probe.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", text, "' is not a delay (expected e.g. 250us or 1ms)"));
  }
  return probe->wire_delay_us;
}

// A comma list of integers 1..`max` for --`flag`.
absl::StatusOr<std::vector<int>> ParseCounts(const std::string& flag, const std::string& text,
                                             int max) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1 || v > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(item), "' is not an integer 1..", max));
    }
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

absl::StatusOr<std::vector<int>> ParsePeriods(const std::string& text) {
  return ParseCounts("periods", text, 4096);
}

// A comma list of names, each one of `known`.
absl::StatusOr<std::vector<std::string>> ParseNames(const std::string& flag,
                                                    const std::string& text,
                                                    const std::vector<std::string>& known) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (std::find(known.begin(), known.end(), std::string(item)) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown name '",
                                                     std::string(item), "' (expected ",
                                                     absl::StrJoin(known, ", "), ")"));
    }
    out.emplace_back(item);
  }
  return out;
}

std::string DefaultBinDir(const char* argv0) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self = fs::absolute(argv0);
  return self.parent_path().string();
}

// summary.md and the PNG plots from results (also printed: the summary).
int WriteReports(const nlohmann::json& results, const std::string& out_dir) {
  std::vector<std::string> pngs;
  int rc = 0;
  absl::Status plotted = WritePlots(results, out_dir, &pngs);
  if (!plotted.ok()) {
    std::cerr << "odmoe-bench: plots: " << plotted.message() << "\n";
    rc = 1;
  }
  std::string md = MarkdownSummary(results);
  if (!pngs.empty()) {
    md += "## Plots\n\n";
    for (const std::string& p : pngs) md += "![" + p + "](" + p + ")\n";
  }
  std::ofstream(out_dir + "/summary.md") << md;
  std::cout << md;
  std::cerr << "odmoe-bench: wrote " << out_dir << "/summary.md";
  for (const std::string& p : pngs) std::cerr << ", " << p;
  std::cerr << "\n";
  return rc;
}

int Main(int argc, char** argv) {
  BenchOptions o;
  std::string experiments, configs, periods, load_bandwidth, link_bandwidth, sweep, report_only,
      deployments,
      link_delay, clients, drafts, draft_wait, prefill_lengths, mini_batches, mixed_floor;
  float load_ratio = 64;
  CliArgs args("odmoe-bench",
               "Reproduces the OD-MoE evaluation on a cluster: deployments side by side, recall, "
               "ablations, alignment periods, a timing diagram and the Eq. 1 timing model.");
  args.AddString("topology", &o.topology_path, "FILE",
                 "base topology (default deploy/testbed-10.yaml); deployments derive from it");
  args.AddFlag("attach", &o.attach,
               "drive the cluster the topology describes, already running (start nothing)");
  args.AddString("out", &o.out_dir, "DIR", "output directory (default bench-out)");
  args.AddString("bin-dir", &o.bin_dir, "DIR",
                 "where odmoe-cluster and the daemons are (default: next to odmoe-bench)");
  args.AddString("heldout", &o.heldout, "FILE",
                 "held-out text for prompts (default tests/data/heldout.txt)");
  args.AddFlag("quick", &o.quick, "a shorter run (under 5 minutes on 2 cores)");
  args.AddString("experiments", &experiments, "LIST",
                 "comma list of deployments,load-sweep,ablation,periods,timing,recall,concurrency,"
                 "speculative,prefill (default all)");
  args.AddString("configs", &configs, "LIST",
                 "PROMPTxOUTPUT lengths for deployments (default 16x64,16x256,128x64,128x256)");
  args.AddString("deployments", &deployments, "LIST",
                 "deployments to compare: odmoe,lookahead,lookahead-mol,lookahead-daop,none,"
                 "odmoe-host,none-host,odmoe-sub,none-sub,odmoe-degrade,random-degrade,odmoe-mixed,"
                 "random,resident,lru,lfu,utility (default all)");
  args.AddInt("prompts", &o.prompts, "N", "prompts per configuration (default 3; quick 1)");
  args.AddInt("repeats", &o.repeats, "N", "prompts per ablation case (default 5; quick 2)");
  args.AddString("periods", &periods, "LIST", "alignment periods (default 1,2,4,8,16)");
  args.AddInt("recall-tokens", &o.recall_tokens, "N", "output tokens for recall (default 256)");
  args.AddString("clients", &clients, "LIST",
                 "concurrency: clients at once, one level each (default 1,2,4,8,16)");
  args.AddInt("concurrency-tokens", &o.concurrency_tokens, "N",
              "concurrency: output tokens per request (default 64)");
  args.AddInt("concurrency-drafts", &o.concurrency_drafts, "N",
              "concurrency: each level again with N drafted tokens per request and iteration "
              "(default 4; 0 = not)");
  args.AddString("drafts", &drafts, "LIST",
                 "speculative: draft_tokens levels, one each (default 2,4,8)");
  args.AddInt("speculative-tokens", &o.speculative_tokens, "N",
              "speculative: output tokens per request (default 64)");
  args.AddString("draft-wait", &draft_wait, "DELAY",
                 "speculative: the waiting variant's shadow.draft_wait (default 20ms)");
  args.AddString("prefill-lengths", &prefill_lengths, "LIST",
                 "prefill: prompt lengths in tokens (default 64,264)");
  args.AddString("mini-batches", &mini_batches, "LIST",
                 "prefill: prefill.mini_batch sizes, besides none (default 4,16,64)");
  args.AddInt("ablation-tokens", &o.ablation_tokens, "N",
              "output tokens for ablation and periods (default 256)");
  args.AddFloat("load-ratio", &load_ratio, "R",
                "emulated expert load time / expert compute time (default 64; 0 = no cap)");
  args.AddString("load-bandwidth", &load_bandwidth, "RATE",
                 "emulated load bandwidth instead of --load-ratio, e.g. 200MB/s");
  args.AddString("sweep", &sweep, "LIST",
                 "load / compute ratios of the load sweep (default 4,16,64,256)");
  args.AddInt("lru-experts", &o.lru_experts, "N",
              "experts each lru / lfu / utility cache worker keeps (default 16)");
  args.AddInt("port-base", &o.port_base, "PORT",
              "renumber the nodes' ports from PORT (and serve no HTTP)");
  args.AddString("link-delay", &link_delay, "DELAY",
                 "emulated one-way delay on every message (wire.emulated_delay), e.g. 250us");
  args.AddString("mixed-floor", &mixed_floor, "F",
                 "odmoe-mixed: the retention ratio at the last layer (workers.mixed_precision.floor, "
                 "default 0)");
  args.AddInt("host-slowdown", &o.host_slowdown, "N",
              "odmoe-host / none-host: the host computes N x slower than the workers' device "
              "(workers.host_compute_slowdown, default 8)");
  args.AddString("link-bandwidth", &link_bandwidth, "RATE",
                 "the links' bandwidth for auto prefill mini-batches (wire.link_bandwidth), "
                 "e.g. 1Gbit/s");
  args.AddString("network", &o.network, "TEXT",
                 "how the links are emulated, for the report (scripts/netns_testbed.sh sets it)");
  args.AddString("report-only", &report_only, "FILE",
                 "only redraw summary.md and the plots from a results.json into --out");
  args.AddInt("start-timeout", &o.start_timeout, "S", "seconds a deployment may take to start");
  if (std::optional<int> exit = args.ParseOrExit(argc, argv)) return *exit;

  if (o.quick) {
    if (!args.IsSet("prompts")) o.prompts = 1;
    if (!args.IsSet("repeats")) o.repeats = 2;
    if (!args.IsSet("periods")) o.periods = {1, 4, 16};
    if (!args.IsSet("recall-tokens")) o.recall_tokens = 128;
    if (!args.IsSet("ablation-tokens")) o.ablation_tokens = 64;
    if (!args.IsSet("configs")) o.configs = {{16, 64}, {128, 64}};
    if (!args.IsSet("sweep")) o.sweep_ratios = {4, 64, 256};
    if (!args.IsSet("clients")) o.clients = {1, 4, 8};
    if (!args.IsSet("concurrency-tokens")) o.concurrency_tokens = 32;
    if (!args.IsSet("drafts")) o.drafts = {4};
    if (!args.IsSet("speculative-tokens")) o.speculative_tokens = 48;
    if (!args.IsSet("prefill-lengths")) o.prefill_lengths = {264};
    if (!args.IsSet("mini-batches")) o.mini_batches = {16};
  }
  if (o.configs.empty()) o.configs = Table2Configs();
  if (!configs.empty()) {
    absl::StatusOr<std::vector<BenchConfig>> c = ParseConfigs(configs);
    if (!c.ok()) return Fail(std::string(c.status().message()), 2);
    o.configs = *c;
  }
  // Comma lists of counts: --clients, --prefill-lengths, --mini-batches, --drafts.
  for (auto [flag, text, max, out] :
       {std::make_tuple("clients", &clients, 256, &o.clients),
        std::make_tuple("prefill-lengths", &prefill_lengths, 4096, &o.prefill_lengths),
        std::make_tuple("mini-batches", &mini_batches, 4096, &o.mini_batches),
        std::make_tuple("drafts", &drafts, kMaxDraftTokens, &o.drafts)}) {
    if (text->empty()) continue;
    absl::StatusOr<std::vector<int>> counts = ParseCounts(flag, *text, max);
    if (!counts.ok()) return Fail(std::string(counts.status().message()), 2);
    *out = *counts;
  }
  if (!periods.empty()) {
    absl::StatusOr<std::vector<int>> p = ParsePeriods(periods);
    if (!p.ok()) return Fail(std::string(p.status().message()), 2);
    o.periods = *p;
  }
  absl::StatusOr<std::vector<std::string>> chosen = ParseNames(
      "deployments", deployments,
      {"odmoe", "lookahead", "lookahead-mol", "lookahead-daop", "none", "odmoe-host",
       "none-host", "odmoe-sub", "none-sub", "odmoe-degrade", "random-degrade", "odmoe-mixed",
       "random",
       "resident", "lru", "lfu", "utility"});
  if (!chosen.ok()) return Fail(std::string(chosen.status().message()), 2);
  o.deployments = *chosen;
  if (!link_delay.empty()) {
    absl::StatusOr<int64_t> us = ParseDelayUs("--link-delay", link_delay);
    if (!us.ok()) return Fail(std::string(us.status().message()), 2);
    o.link_delay_us = *us;
  }
  if (!draft_wait.empty()) {
    absl::StatusOr<int64_t> us = ParseDelayUs("--draft-wait", draft_wait);
    if (!us.ok()) return Fail(std::string(us.status().message()), 2);
    o.draft_wait_us = *us;
  }
  if (!mixed_floor.empty() &&
      (!absl::SimpleAtod(mixed_floor, &o.mixed_floor) || !(o.mixed_floor >= 0) ||
       o.mixed_floor > 1)) {
    return Fail(absl::StrCat("--mixed-floor: '", mixed_floor, "' is not a number in [0, 1]"), 2);
  }
  if (!sweep.empty()) {
    o.sweep_ratios.clear();
    for (absl::string_view item : absl::StrSplit(sweep, ',', absl::SkipEmpty())) {
      double r = 0;
      if (!absl::SimpleAtod(item, &r) || !(r > 0) || r > 1e6) {
        return Fail(absl::StrCat("--sweep: '", std::string(item),
                                 "' is not a ratio (expected numbers in (0, 1e6])"),
                    2);
      }
      o.sweep_ratios.push_back(r);
    }
    if (o.sweep_ratios.empty()) return Fail("--sweep is empty", 2);
  }
  if (o.prompts < 1 || o.repeats < 1 || o.recall_tokens < 2 || o.ablation_tokens < 2 ||
      o.concurrency_tokens < 2 || o.speculative_tokens < 2 || o.lru_experts < 1 || o.start_timeout < 1 || o.port_base < 0 ||
      o.port_base > 65000) {
    return Fail(
        "--prompts, --repeats, --lru-experts, --start-timeout must be >= 1, token "
        "counts >= 2, --port-base in [0, 65000]",
        2);
  }
  if (o.concurrency_drafts < 0 || o.concurrency_drafts > kMaxDraftTokens) {
    return Fail(absl::StrCat("--concurrency-drafts must be in [0, ", kMaxDraftTokens, "]"), 2);
  }
  if (load_ratio < 0) return Fail("--load-ratio must be >= 0", 2);
  o.load_ratio = load_ratio;
  if (!link_bandwidth.empty()) {
    absl::StatusOr<uint64_t> rate = ParseByteRate(link_bandwidth);
    if (!rate.ok()) return Fail(absl::StrCat("--link-bandwidth: ", rate.status().message()), 2);
    o.link_bandwidth = *rate;
  }
  if (!load_bandwidth.empty()) {
    absl::StatusOr<uint64_t> rate = ParseByteRate(load_bandwidth);
    if (!rate.ok()) return Fail(absl::StrCat("--load-bandwidth: ", rate.status().message()), 2);
    o.load_bandwidth = *rate;
  }
  std::vector<std::string> known;
  for (const auto& [name, fn] : AllExperiments()) known.push_back(name);
  chosen = ParseNames("experiments", experiments, known);
  if (!chosen.ok()) return Fail(std::string(chosen.status().message()), 2);
  o.experiments = *chosen;
  if (o.bin_dir.empty()) o.bin_dir = DefaultBinDir(argv[0]);
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return Fail(absl::StrCat(o.out_dir, ": ", ec.message()));
  o.out_dir = fs::absolute(o.out_dir).string();

  if (!report_only.empty()) {
    std::ifstream in(report_only);
    if (!in) return Fail(absl::StrCat(report_only, ": cannot read"));
    nlohmann::json results = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (results.is_discarded() || !results.is_object()) {
      return Fail(absl::StrCat(report_only, ": not a results.json (invalid JSON)"));
    }
    return WriteReports(results, o.out_dir);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::time_t started = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&started));
  absl::StatusOr<std::unique_ptr<BenchContext>> ctx = BenchContext::Create(o);
  if (!ctx.ok()) return Fail(std::string(ctx.status().message()));
  nlohmann::json results;
  results["meta"] = {{"model", (*ctx)->base().model},
                     {"topology", o.topology_path},
                     {"quick", o.quick},
                     {"started", when},
                     {"workers", (*ctx)->base().n_workers()},
                     {"groups", (*ctx)->base().n_groups()}};
  results["emulation"] = (*ctx)->EmulationJson();
  const std::string json_path = o.out_dir + "/results.json";
  int failures = 0;
  std::vector<std::pair<std::string, Experiment>> chosen_experiments;
  for (auto& [name, experiment] : AllExperiments()) {
    if (o.experiments.empty() ||
        std::find(o.experiments.begin(), o.experiments.end(), name) != o.experiments.end()) {
      chosen_experiments.emplace_back(name, std::move(experiment));
    }
  }
  int index = 0;
  for (const auto& [name, experiment] : chosen_experiments) {
    (*ctx)->BeginExperiment(name, ++index, static_cast<int>(chosen_experiments.size()));
    absl::StatusOr<nlohmann::json> r = experiment(**ctx);
    (*ctx)->EndExperiment(r.ok());
    if (!r.ok()) {
      std::cerr << "odmoe-bench: experiment " << name << " failed: " << r.status().message()
                << "\n";
      results[name] = {{"error", std::string(r.status().message())}};
      ++failures;
      continue;
    }
    results[name] = *r;
    std::ofstream(json_path) << results.dump(2) << "\n";  // partial results survive a crash
  }
  (*ctx)->StopClusters();
  results["meta"]["seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream(json_path) << results.dump(2) << "\n";
  if (WriteReports(results, o.out_dir) != 0) ++failures;
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace odmoe::bench

int main(int argc, char** argv) { return odmoe::bench::Main(argc, argv); }
