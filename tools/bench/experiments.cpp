#include "bench/experiments.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend_registry.h"
#include "bench/timing_trace.h"
#include "cluster/main_client.h"
#include "cluster/node_stats.h"
#include "engine/expert_ffn.h"
#include "util/progress_line.h"
#include "util/status_macros.h"
#include "util/string_view.h"
#include "worker_node/expert_slots.h"

namespace odmoe::bench {
namespace {

using json = nlohmann::json;

// The bench's one status line on stderr: result lines (Progress) are
// written whole; the running experiment's count of requests (Running)
// is redrawn in place on a terminal, a line every 5 s elsewhere.
ProgressLine& StatusLine() {
  static ProgressLine line(stderr, std::chrono::seconds(5));
  return line;
}
void Progress(const std::string& line) { StatusLine().Finish("odmoe-bench: " + line); }
void Running(const std::string& text) { StatusLine().Update("odmoe-bench: " + text); }

// Median time of one expert's FFN on one row, in this process, on the
// workers' backend: the "expert compute time" the emulated link is scaled by.
absl::StatusOr<double> CalibrateExpertComputeUs(const ModelFile& model, const std::string& be) {
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(be));
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<SlotDevice> device, CreateSlotDevice(*backend));
  // Layers may store their experts in different types: time expert 0 of
  // every layer in turn (one slot per distinct storage), so the median is
  // over the layers.
  const ModelConfig& c = model.config();
  std::vector<int> storage_of_layer;  // index into `distinct`
  std::vector<ExpertSlots::ExpertId> distinct;
  for (int l = 0; l < c.n_layer; ++l) {
    size_t k = 0;
    while (k < distinct.size() && !(c.experts_of(distinct[k].first) == c.experts_of(l))) ++k;
    if (k == distinct.size()) distinct.emplace_back(l, 0);
    storage_of_layer.push_back(static_cast<int>(k));
  }
  const int n_slots = static_cast<int>(distinct.size());
  ODMOE_ASSIGN_OR_RETURN(ExpertSlots slots,
                         ExpertSlots::Create(model, *backend, n_slots, std::move(device), distinct));
  std::vector<ExpertWeights> weights;
  for (int k = 0; k < n_slots; ++k) {
    ODMOE_RETURN_IF_ERROR(slots.Load(k, distinct[static_cast<size_t>(k)].first, 0, false));
    ODMOE_ASSIGN_OR_RETURN(ExpertWeights w, slots.Acquire(k));
    weights.push_back(w);
  }
  ODMOE_ASSIGN_OR_RETURN(ExpertFfnScratch scratch, ExpertFfnScratch::Create(*backend, c.n_ff, 1));
  ODMOE_ASSIGN_OR_RETURN(std::unique_ptr<BackendBuffer> io,
                         backend->Allocate(2 * c.n_embd * sizeof(float)));
  // io may be device memory: fill it through the backend, and time each
  // run up to its completion (a device backend only queues the ops).
  float* x = static_cast<float*>(io->data());
  std::vector<float> row(static_cast<size_t>(c.n_embd));
  for (int64_t i = 0; i < c.n_embd; ++i) row[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  ODMOE_RETURN_IF_ERROR(backend->CopyToBackend(x, row.data(), row.size() * sizeof(float)));
  std::vector<double> times;
  for (int i = 0; i < 300; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const int k = storage_of_layer[static_cast<size_t>(i % c.n_layer)];
    RunExpertFfn(*backend, weights[static_cast<size_t>(k)], ConstMat(x, 1, c.n_embd), scratch,
                 Mat{x + c.n_embd, 1, c.n_embd});
    ODMOE_RETURN_IF_ERROR(backend->Synchronize());
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

json MetricsJson(const RequestMetrics& m, bool exact) {
  return {{"prompt_tokens", m.prompt_tokens},
          {"output_tokens", m.output_tokens},
          {"ttft_s", m.ttft_s},
          {"decode_tps", m.decode_tps},
          {"output_tps", m.output_tps},
          {"recall", m.recall},
          {"predictions_missing", m.predictions_missing},
          {"hits", m.hits},
          {"misses", m.misses},
          {"host_computes", m.host_computes},
          {"substitutions", m.substitutions},
          {"low_precision", m.low_precision},
          {"agreement", m.agreement},
          {"judged_ppl", m.judged_ppl},
          {"reference_judged_ppl", m.reference_judged_ppl},
          {"reloads", m.reloads},
          {"stall_per_token_s", m.stall_per_token_s},
          // Decode stall over decode misses: what a miss costs (hits that
          // waited for the rest of their load count in the stall too).
          {"stall_per_miss_s", m.misses > 0 ? m.stall_per_token_s * m.output_tokens /
                                                  static_cast<double>(m.misses)
                                            : 0.0},
          {"bytes_loaded_per_token", m.bytes_loaded_per_token},
          {"network_bytes_per_token", m.network_bytes_per_token},
          {"alignment_bytes_per_token", m.alignment_bytes_per_token},
          {"cpu_ms_per_token_main", m.cpu_ms_per_token_main},
          {"cpu_ms_per_token_shadow", m.cpu_ms_per_token_shadow},
          {"cpu_ms_per_token_workers", m.cpu_ms_per_token_workers},
          {"prediction", m.prediction},
          {"token_period", m.token_period},
          {"kv_period", m.kv_period},
          {"exact", exact}};
}

// Mean of every numeric field of a list of request results (+ "_std" for
// the speeds), "exact" = all exact.
json Aggregate(const std::vector<json>& runs) {
  json out;
  out["runs"] = runs.size();
  if (runs.empty()) return out;
  for (const auto& [key, value] : runs.front().items()) {
    if (!value.is_number()) continue;
    std::vector<double> v;
    for (const json& r : runs) v.push_back(r[key].get<double>());
    const MeanStd s = Summarize(v);
    out[key] = s.mean;
    if (key == "decode_tps" || key == "output_tps" || key == "ttft_s") out[key + "_std"] = s.std;
  }
  bool exact = true;
  for (const json& r : runs) exact = exact && r.value("exact", false);
  out["exact"] = exact;
  out["prediction"] = runs.front().value("prediction", "");
  return out;
}

v1::Experiment ShadowAlignment(int token_period, int kv_period) {
  v1::Experiment e;
  e.set_prediction("shadow");
  e.set_set_alignment(true);
  e.set_token_period(static_cast<uint32_t>(token_period));
  e.set_kv_period(static_cast<uint32_t>(kv_period));
  return e;
}

v1::Experiment Prediction(const std::string& mode) {
  v1::Experiment e;
  e.set_prediction(mode);
  return e;
}

/// prediction: lookahead with a variant (topology.h LookaheadSpec).
v1::Experiment Lookahead(int layers, int candidates, int from_layer) {
  v1::Experiment e = Prediction("lookahead");
  e.set_set_lookahead(true);
  e.set_lookahead_layers(static_cast<uint32_t>(layers));
  e.set_lookahead_candidates(static_cast<uint32_t>(candidates));
  e.set_lookahead_from_layer(static_cast<uint32_t>(from_layer));
  return e;
}

// The look-ahead variants the deployments and the recall experiment run:
// FIRM-MoE's Meeting-of-Layers (3 layers voting with 4 candidates each, the
// paper's shallow-layer setting) and DAOP's late start (look-ahead from the
// fifth layer on, the gate before).
v1::Experiment LookaheadMol() { return Lookahead(3, 4, 0); }
v1::Experiment LookaheadDaop() { return Lookahead(1, 0, 4); }

// ---- deployments ----------------------------------------------------------

absl::StatusOr<json> Deployments(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  struct Variant {
    std::string name, cluster;
    v1::Experiment experiment;
  };
  std::vector<Variant> variants = {{"odmoe", "odmoe", ShadowAlignment(1, 1)},
                                   {"lookahead", "odmoe", Lookahead(1, 0, 0)},
                                   {"lookahead-mol", "odmoe", LookaheadMol()},
                                   {"lookahead-daop", "odmoe", LookaheadDaop()},
                                   {"none", "odmoe", Prediction("none")},
                                   {"odmoe-host", "odmoe-host", ShadowAlignment(1, 1)},
                                   {"none-host", "odmoe-host", Prediction("none")},
                                   {"odmoe-sub", "odmoe-sub", ShadowAlignment(1, 1)},
                                   {"odmoe-degrade", "odmoe-degrade", ShadowAlignment(1, 1)},
                                   {"random-degrade", "odmoe-degrade", Prediction("random")},
                                   {"odmoe-mixed", "odmoe-mixed", ShadowAlignment(1, 1)},
                                   {"none-sub", "odmoe-sub", Prediction("none")},
                                   {"random", "odmoe", Prediction("random")},
                                   {"resident", "resident", {}},
                                   {"lru", "lru", {}},
                                   {"lfu", "lfu", {}},
                                   {"utility", "utility", ShadowAlignment(1, 1)}};
  if (o.attach) variants = {{"attached", "attached", {}}};
  if (!o.deployments.empty()) {
    std::vector<Variant> chosen;
    for (const Variant& v : variants) {
      if (std::find(o.deployments.begin(), o.deployments.end(), v.name) != o.deployments.end()) {
        chosen.push_back(v);
      }
    }
    variants = chosen;
  }
  json results = json::object();
  json memory = json::object();
  for (const Variant& v : variants) {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(v.cluster));
    json per_config = json::object();
    for (const BenchConfig& c : o.configs) {
      ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(c.prompt_tokens, o.prompts));
      std::vector<json> runs;
      for (const auto& p : prompts) {
        bool exact = false;
        ODMOE_ASSIGN_OR_RETURN(RequestMetrics m,
                               ctx.Run(*cluster, {p, c.output_tokens, v.experiment}, &exact));
        runs.push_back(MetricsJson(m, exact));
      }
      per_config[c.name()] = Aggregate(runs);
      Progress(absl::StrFormat("deployments: %s %s: decode %.1f tokens/s, recall %.3f, exact %s",
                               v.name, c.name(), per_config[c.name()]["decode_tps"].get<double>(),
                               per_config[c.name()]["recall"].get<double>(),
                               per_config[c.name()]["exact"].get<bool>() ? "yes" : "NO"));
    }
    results[v.name] = per_config;
    if (!memory.contains(v.cluster)) {
      ODMOE_ASSIGN_OR_RETURN(memory[v.cluster], ctx.MemoryJson(v.cluster));
    }
  }
  // The single-process reference engine (no cluster, no emulated link).
  json reference = json::object();
  for (const BenchConfig& c : o.configs) {
    ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(c.prompt_tokens, o.prompts));
    std::vector<json> runs;
    for (const auto& p : prompts) {
      ODMOE_ASSIGN_OR_RETURN(BenchContext::Reference r, ctx.ReferenceRun(p, c.output_tokens));
      runs.push_back({{"decode_tps", r.decode_tps},
                      {"ttft_s", r.ttft_s},
                      {"output_tps", r.output_tps},
                      {"exact", true}});
    }
    reference[c.name()] = Aggregate(runs);
  }
  results["reference"] = reference;
  // The headline: OD-MoE / resident decode throughput, averaged over configs.
  json headline = json::object();
  if (results.contains("odmoe") && results.contains("resident")) {
    for (const std::string other : {"resident", "none", "random", "lru", "reference"}) {
      if (!results.contains(other)) continue;
      std::vector<double> ratios;
      for (const BenchConfig& c : o.configs) {
        const double a = results["odmoe"][c.name()]["decode_tps"].get<double>();
        const double b = results[other][c.name()]["decode_tps"].get<double>();
        if (b > 0) ratios.push_back(a / b);
      }
      headline["odmoe_over_" + other] = Summarize(ratios).mean;
    }
  }
  return json{{"results", results}, {"memory", memory}, {"headline", headline}};
}

// ---- recall -----------------------------------------------------------------

// Recall (Eq. 2-3) of `experiment` over `prompts` on a running cluster:
// overall, the per-token curve, predictions missing, whether every request
// gave the reference tokens.
absl::StatusOr<json> MeasureRecall(BenchContext& ctx, ClusterProcess& cluster,
                                   const std::vector<std::vector<int32_t>>& prompts,
                                   const v1::Experiment& experiment) {
  const int tokens = ctx.options().recall_tokens;
  std::vector<double> sum(static_cast<size_t>(tokens), 0.0), overall;
  std::vector<int> count(sum.size(), 0);
  uint64_t missing = 0;
  std::vector<uint64_t> layer_correct, layer_slots;
  bool all_exact = true;
  for (const auto& p : prompts) {
    bool exact = false;
    ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, ctx.Run(cluster, {p, tokens, experiment}, &exact));
    all_exact = all_exact && exact;
    overall.push_back(m.recall);
    missing += m.predictions_missing;
    layer_correct.resize(std::max(layer_correct.size(), m.recall_layer_correct.size()), 0);
    layer_slots.resize(std::max(layer_slots.size(), m.recall_layer_slots.size()), 0);
    for (size_t l = 0; l < m.recall_layer_correct.size(); ++l) {
      layer_correct[l] += m.recall_layer_correct[l];
    }
    for (size_t l = 0; l < m.recall_layer_slots.size(); ++l) layer_slots[l] += m.recall_layer_slots[l];
    for (size_t i = 0; i < m.recall_per_token.size() && i < sum.size(); ++i) {
      sum[i] += m.recall_per_token[i];
      ++count[i];
    }
  }
  json curve = json::array();
  for (size_t i = 0; i < sum.size(); ++i) {
    curve.push_back(count[i] ? sum[i] / count[i] : std::nan(""));
  }
  // Recall by layer (depth): null where a layer was never predicted.
  json per_layer = json::array();
  for (size_t l = 0; l < layer_slots.size(); ++l) {
    if (layer_slots[l] == 0) {
      per_layer.push_back(nullptr);
    } else {
      per_layer.push_back(static_cast<double>(l < layer_correct.size() ? layer_correct[l] : 0) /
                          static_cast<double>(layer_slots[l]));
    }
  }
  return json{{"recall", Summarize(overall).mean},
              {"per_token", curve},
              {"per_layer", per_layer},
              {"predictions_missing", missing},
              {"exact", all_exact}};
}

absl::StatusOr<json> Recall(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  struct Mode {
    std::string name;
    int token_period, kv_period;
  };
  const std::vector<Mode> modes = {{"no alignment", 0, 0}, {"token", 1, 0}, {"token+kv", 1, 1}};
  std::vector<std::string> clusters = {"shadow-f16",  "shadow-q8_0", "shadow-q6_k",
                                       "shadow-q5_k", "shadow-q4_k", "shadow-q4_0"};
  if (o.attach) clusters = {"attached"};
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(16, std::max(1, o.prompts)));
  json out = json::object();
  for (const std::string& name : clusters) {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(name));
    json per_mode = json::object();
    for (const Mode& mode : modes) {
      ODMOE_ASSIGN_OR_RETURN(
          per_mode[mode.name],
          MeasureRecall(ctx, *cluster, prompts, ShadowAlignment(mode.token_period, mode.kv_period)));
      Progress(absl::StrFormat("recall: %s, %s: %.4f", name, mode.name,
                               per_mode[mode.name]["recall"].get<double>()));
    }
    out[name] = per_mode;
  }
  // The gate look-ahead on the main node (no shadow), on the cluster that
  // runs now: layer l+1 predicted from layer l's MoE input.
  if (!o.attach) {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(clusters.back()));
    json variants = json::object();
    for (const auto& [name, experiment] :
         std::vector<std::pair<std::string, v1::Experiment>>{
             {"gate look-ahead", Lookahead(1, 0, 0)},
             {"meeting of 3 layers, 4 candidates (FIRM)", LookaheadMol()},
             {"from layer 4 (DAOP)", LookaheadDaop()}}) {
      ODMOE_ASSIGN_OR_RETURN(json g, MeasureRecall(ctx, *cluster, prompts, experiment));
      Progress(absl::StrFormat("recall: %s on the main node: %.4f", name,
                               g["recall"].get<double>()));
      variants[name] = g;
    }
    out["lookahead"] = variants;
  }
  return out;
}

// ---- ablation (paper §4.2, Fig. 8) ----------------------------------------------

absl::StatusOr<json> Ablation(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  struct Case {
    std::string name;
    v1::Experiment experiment;
  };
  const std::vector<Case> cases = {
      {"1: token + KV alignment", ShadowAlignment(1, 1)},
      {"2: token alignment only", ShadowAlignment(1, 0)},
      {"3: KV alignment only", ShadowAlignment(0, 1)},
      {"4: no alignment", ShadowAlignment(0, 0)},
      {"5: no shadow, random prefetch", Prediction("random")},
      {"6: no shadow, load after gate", Prediction("none")},
  };
  ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(o.attach ? "attached" : "odmoe"));
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(16, o.repeats));
  json out = json::array();
  for (const Case& c : cases) {
    std::vector<json> runs;
    for (const auto& p : prompts) {
      bool exact = false;
      ODMOE_ASSIGN_OR_RETURN(RequestMetrics m,
                             ctx.Run(*cluster, {p, o.ablation_tokens, c.experiment}, &exact));
      runs.push_back(MetricsJson(m, exact));
    }
    json a = Aggregate(runs);
    a["case"] = c.name;
    Progress(absl::StrFormat("ablation: %s: %.1f +- %.1f tokens/s", c.name,
                             a["decode_tps"].get<double>(), a["decode_tps_std"].get<double>()));
    out.push_back(a);
  }
  return json{{"config", absl::StrCat(16, "x", o.ablation_tokens)}, {"cases", out}};
}

// ---- alignment periods (Fig. 9) ------------------------------------------------

absl::StatusOr<json> Periods(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(o.attach ? "attached" : "odmoe"));
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(16, std::max(1, o.repeats / 2)));
  json tps = json::array(), recall = json::array();
  for (int tp : o.periods) {
    json tps_row = json::array(), recall_row = json::array();
    for (int kp : o.periods) {
      std::vector<json> runs;
      for (const auto& p : prompts) {
        bool exact = false;
        ODMOE_ASSIGN_OR_RETURN(
            RequestMetrics m, ctx.Run(*cluster, {p, o.ablation_tokens, ShadowAlignment(tp, kp)},
                                      &exact));
        runs.push_back(MetricsJson(m, exact));
      }
      const json a = Aggregate(runs);
      tps_row.push_back(a["decode_tps"]);
      recall_row.push_back(a["recall"]);
      Progress(absl::StrFormat("periods: token %d, KV %d: %.1f tokens/s, recall %.3f", tp, kp,
                               a["decode_tps"].get<double>(), a["recall"].get<double>()));
    }
    tps.push_back(tps_row);
    recall.push_back(recall_row);
  }
  return json{{"periods", o.periods},
              {"config", absl::StrCat(16, "x", o.ablation_tokens)},
              {"decode_tps", tps},
              {"recall", recall},
              {"rows", "token period"},
              {"cols", "KV period"}};
}

// ---- timing diagram and Eq. 1 ----------------------------------------------------

// ---- load sweep: how the emulated link decides who wins ------------------------

absl::StatusOr<json> LoadSweep(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  if (o.attach) return absl::FailedPreconditionError("the load sweep restarts clusters (not with --attach)");
  const BenchConfig c = o.configs.front();
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(c.prompt_tokens, 1));
  auto decode = [&](const std::string& cluster_name, uint64_t bw, const v1::Experiment& e,
                    bool lossy = false) -> absl::StatusOr<double> {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(cluster_name, bw));
    bool exact = false;
    ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, ctx.Run(*cluster, {prompts[0], c.output_tokens, e},
                                                     &exact));
    if (!exact && !lossy) {
      return absl::InternalError("a load-sweep run did not match the reference");
    }
    return m.decode_tps;
  };
  ODMOE_ASSIGN_OR_RETURN(double resident, decode("resident", 0, {}));
  // The policies (row key <name>_tps), each deployment's cluster started
  // once per ratio: OD-MoE and the papers' policies; the lossless ones must
  // give the single process's tokens, the lossy ones (last) need not.
  struct Policy {
    std::string name, cluster;
    v1::Experiment experiment;
    bool lossy = false;
  };
  const std::vector<Policy> policies = {{"odmoe", "odmoe", ShadowAlignment(1, 1)},
                                        {"none", "odmoe", Prediction("none")},
                                        {"lookahead", "odmoe", Lookahead(1, 0, 0)},
                                        {"odmoe_sub", "odmoe-sub", ShadowAlignment(1, 1)},
                                        {"none_sub", "odmoe-sub", Prediction("none")},
                                        {"odmoe_host", "odmoe-host", ShadowAlignment(1, 1)},
                                        {"lru", "lru", {}},
                                        {"lfu", "lfu", {}},
                                        {"utility", "utility", ShadowAlignment(1, 1)},
                                        {"odmoe_mixed", "odmoe-mixed", ShadowAlignment(1, 1), true},
                                        {"odmoe_degrade", "odmoe-degrade", ShadowAlignment(1, 1),
                                         true}};
  json rows = json::array();
  for (double ratio : o.sweep_ratios) {
    const uint64_t bw = ctx.BandwidthForRatio(ratio);
    json row = {{"load_over_compute", ratio},
                {"load_us", ratio * ctx.expert_compute_us()},
                {"load_bandwidth_bytes_per_s", bw},
                {"resident_tps", resident}};
    std::string line;
    for (const Policy& p : policies) {
      ODMOE_ASSIGN_OR_RETURN(double tps, decode(p.cluster, bw, p.experiment, p.lossy));
      row[p.name + "_tps"] = tps;
      absl::StrAppend(&line, ", ", p.name, " ", absl::StrFormat("%.1f", tps));
    }
    rows.push_back(row);
    Progress(absl::StrFormat("load sweep: load = %.0f x compute (%.0f us)%s, resident %.1f "
                             "tokens/s",
                             ratio, ratio * ctx.expert_compute_us(), line, resident));
  }
  return json{{"config", c.name()}, {"rows", rows}};
}

absl::StatusOr<json> Timing(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  json out = json::object();
  std::vector<std::pair<std::string, v1::Experiment>> runs = {
      {"odmoe", ShadowAlignment(1, 1)}, {"none", Prediction("none")}};
  if (o.attach) runs = {{"attached", {}}};
  for (const auto& [name, experiment] : runs) {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster,
                           ctx.Cluster(o.attach ? "attached" : "odmoe"));
    ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(16, 1));
    const std::vector<std::string> addresses = cluster->node_addresses();
    ODMOE_ASSIGN_OR_RETURN(std::shared_ptr<const PeerAuth> op, cluster->OperatorAuth());
    ODMOE_RETURN_IF_ERROR(StartTracing(addresses, op.get()));
    bool exact = false;
    ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, ctx.Run(*cluster, {prompts[0], 24, experiment},
                                                     &exact));
    ODMOE_ASSIGN_OR_RETURN(ClusterTrace trace, CollectClusterTrace(addresses, op.get()));
    const int groups = cluster->topology().n_groups();
    const TimingModel t = MeasureTimingModel(trace, groups);
    const std::string file = absl::StrCat(o.out_dir, "/trace-", name, ".json");
    std::ofstream(file) << ToPerfetto(trace, 8, 10).dump();
    json clocks = json::array();
    for (const NodeSpans& n : trace.nodes) {
      clocks.push_back({{"node", n.node_id},
                        {"offset_us", n.offset_us},
                        {"rtt_us", n.rtt_us},
                        {"spans", n.events.size()},
                        {"dropped", n.dropped}});
    }
    out[name] = {{"trace_file", file},
                 {"decode_tps", m.decode_tps},
                 {"groups", t.groups},
                 {"layers_measured", t.layers},
                 {"t_main_us", t.t_main_us},
                 {"t_worker_us", t.t_worker_us},
                 {"t_load_us", t.t_load_us},
                 {"t_compute_us", t.t_compute_us},
                 {"t_head_us", t.t_head_us},
                 {"t_maxload_us", t.t_maxload_us},
                 {"load_over_compute", t.t_compute_us > 0 ? t.t_load_us / t.t_compute_us : 0},
                 {"io_bound", t.io_bound},
                 {"verdict", t.verdict},
                 {"clocks", clocks}};
    Progress(absl::StrCat("timing (", name, "): ", t.verdict));
  }
  return out;
}

// ---- concurrency: several clients at once (continuous batching) ---------------

// The value below which a fraction `q` of `v` lies (nearest rank); 0 when empty.
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
}

absl::StatusOr<json> Concurrency(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster("odmoe"));
  const int most = *std::max_element(o.clients.begin(), o.clients.end());
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(o.concurrency_prompt_tokens, most));
  // One level: `n` clients at once, each request verifying `drafts` of the
  // shadow's drafted tokens per iteration (0: none; batched speculative
  // decoding when several decode together).
  auto run_level = [&](int n, int drafts) -> absl::StatusOr<json> {
    struct Client {
      absl::Status status;
      std::vector<int32_t> ids;
      std::vector<double> token_times;  // seconds since the level started
      v1::GenerateStats stats;
    };
    std::vector<Client> clients(static_cast<size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&t0] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        Client& c = clients[static_cast<size_t>(i)];
        v1::GenerateRequest req;
        for (int32_t id : prompts[static_cast<size_t>(i) % prompts.size()]) req.add_prompt_ids(id);
        req.set_max_tokens(static_cast<uint32_t>(o.concurrency_tokens));
        req.set_temperature(0);
        req.set_ignore_eos(true);
        req.mutable_experiment()->set_set_draft_tokens(true);
        req.mutable_experiment()->set_draft_tokens(static_cast<uint32_t>(drafts));
        absl::StatusOr<v1::GenerateStats> st =
            GenerateOnMain(cluster->main_address(), req, [&](int32_t id, std::string_view) {
              if (id < 0) return;
              c.ids.push_back(id);
              c.token_times.push_back(since());
            });
        c.status = st.status();
        if (st.ok()) c.stats = *st;
      });
    }
    for (std::thread& t : threads) t.join();
    const double wall = since();
    std::vector<double> ttft, gaps;
    double tokens = 0, recall = 0, hits = 0, tasks = 0;
    uint64_t drafted = 0, accepted = 0;
    bool exact = true;
    for (int i = 0; i < n; ++i) {
      const Client& c = clients[static_cast<size_t>(i)];
      if (!c.status.ok()) {
        return absl::Status(c.status.code(), absl::StrFormat("%d clients: client %d: %s", n, i,
                                                             c.status.message()));
      }
      // A shared iteration's tasks count for every request in it: the hit
      // rate is a ratio of those counts.
      recall += c.stats.recall() / n;
      hits += static_cast<double>(c.stats.expert_hits());
      tasks += static_cast<double>(c.stats.expert_hits() + c.stats.expert_misses());
      drafted += c.stats.drafted_tokens();
      accepted += c.stats.accepted_tokens();
      ODMOE_ASSIGN_OR_RETURN(
          BenchContext::Reference ref,
          ctx.ReferenceRun(prompts[static_cast<size_t>(i) % prompts.size()], o.concurrency_tokens));
      exact = exact && c.ids == ref.output_ids;
      tokens += static_cast<double>(c.ids.size());
      if (!c.token_times.empty()) ttft.push_back(c.token_times.front());
      for (size_t t = 1; t < c.token_times.size(); ++t) {
        gaps.push_back(c.token_times[t] - c.token_times[t - 1]);
      }
    }
    const double tps = wall > 0 ? tokens / wall : 0;
    return json{{"clients", n},
                {"draft_tokens", drafts},
                {"output_tps", tps},
                {"per_client_tps", tps / n},
                {"ttft_p50_s", Percentile(ttft, 0.5)},
                {"ttft_p99_s", Percentile(ttft, 0.99)},
                {"itl_p50_s", Percentile(gaps, 0.5)},
                {"itl_p99_s", Percentile(gaps, 0.99)},
                {"seconds", wall},
                {"recall", recall},
                {"hit_rate", tasks > 0 ? hits / tasks : 0.0},
                {"acceptance", drafted ? static_cast<double>(accepted) / drafted : 0.0},
                {"exact", exact}};
  };
  json levels = json::array();
  double one_client_tps = 0;
  for (int n : o.clients) {
    ODMOE_ASSIGN_OR_RETURN(json level, run_level(n, 0));
    const double tps = level["output_tps"].get<double>();
    if (n == o.clients.front()) one_client_tps = tps / n;
    level["over_one_client"] = one_client_tps > 0 ? tps / one_client_tps : 0.0;
    Progress(absl::StrFormat(
        "concurrency: %d client%s: %.1f output tokens/s in all (%.2fx one client), TTFT p50 "
        "%.0f ms, inter-token p50 %.1f ms, recall %.3f, hit rate %.3f, exact %s",
        n, n == 1 ? "" : "s", tps, level["over_one_client"].get<double>(),
        level["ttft_p50_s"].get<double>() * 1e3, level["itl_p50_s"].get<double>() * 1e3,
        level["recall"].get<double>(), level["hit_rate"].get<double>(),
        level["exact"].get<bool>() ? "yes" : "NO"));
    if (o.concurrency_drafts > 0) {
      // The same clients, each verifying the shadow's drafts: several
      // requests' drafts are verified in one iteration.
      ODMOE_ASSIGN_OR_RETURN(json with, run_level(n, o.concurrency_drafts));
      const double dtps = with["output_tps"].get<double>();
      with["over_no_drafts"] = tps > 0 ? dtps / tps : 0.0;
      Progress(absl::StrFormat(
          "concurrency: %d client%s with %d drafts: %.1f output tokens/s in all (%.2fx without "
          "drafts), acceptance %.3f, inter-token p50 %.1f ms, exact %s",
          n, n == 1 ? "" : "s", o.concurrency_drafts, dtps, with["over_no_drafts"].get<double>(),
          with["acceptance"].get<double>(), with["itl_p50_s"].get<double>() * 1e3,
          with["exact"].get<bool>() ? "yes" : "NO"));
      level["with_drafts"] = with;
    }
    levels.push_back(level);
  }
  return json{{"levels", levels},
              {"prompt_tokens", o.concurrency_prompt_tokens},
              {"output_tokens", o.concurrency_tokens},
              {"draft_tokens", o.concurrency_drafts}};
}

// Runs every prompt once on `cluster` after one unmeasured request (a
// deployment's first request after its start is slower), each checked
// against the reference engine; `what` names the experiment in the error.
absl::StatusOr<std::vector<RequestMetrics>> RunWarm(BenchContext& ctx, ClusterProcess& cluster,
                                                    const std::vector<std::vector<int32_t>>& prompts,
                                                    int tokens, const v1::Experiment& e,
                                                    const std::string& what) {
  bool exact = false;
  ODMOE_RETURN_IF_ERROR(ctx.Run(cluster, {prompts.at(0), tokens, e}, &exact).status());
  std::vector<RequestMetrics> runs;
  for (const std::vector<int32_t>& p : prompts) {
    ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, ctx.Run(cluster, {p, tokens, e}, &exact));
    if (!exact) return absl::InternalError(absl::StrCat(what, ": a run did not match the reference"));
    runs.push_back(std::move(m));
  }
  return runs;
}

// ---- speculative: the shadow as drafter ---------------------------------------

absl::StatusOr<json> Speculative(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(16, o.prompts));
  // Mean over the prompts of one setting on one deployment; every run's
  // tokens are checked against the reference engine.
  struct Row {
    double decode_tps = 0, acceptance = 0, tokens_per_iteration = 0;
    uint64_t drafted = 0, accepted = 0;
  };
  auto measure = [&](const std::string& deployment, const v1::Experiment& e) -> absl::StatusOr<Row> {
    ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, ctx.Cluster(deployment));
    ODMOE_ASSIGN_OR_RETURN(
        std::vector<RequestMetrics> runs,
        RunWarm(ctx, *cluster, prompts, o.speculative_tokens, e, "speculative (" + deployment + ")"));
    Row row;
    uint64_t iterations = 0, tokens = 0;
    for (const RequestMetrics& m : runs) {
      row.decode_tps += m.decode_tps / static_cast<double>(prompts.size());
      row.drafted += m.drafted;
      row.accepted += m.accepted;
      iterations += m.decode_iterations;
      tokens += m.iteration_tokens;
    }
    row.acceptance = row.drafted ? static_cast<double>(row.accepted) / row.drafted : 0.0;
    row.tokens_per_iteration = iterations ? static_cast<double>(tokens) / iterations : 0.0;
    return row;
  };
  auto drafting = [](int draft, int64_t wait_us) {
    v1::Experiment e = ShadowAlignment(1, 1);
    e.set_set_draft_tokens(true);
    e.set_draft_tokens(static_cast<uint32_t>(draft));
    e.set_draft_wait_us(static_cast<uint32_t>(wait_us));
    return e;
  };
  ODMOE_ASSIGN_OR_RETURN(Row resident, measure("resident", {}));
  ODMOE_ASSIGN_OR_RETURN(Row plain, measure("odmoe", drafting(0, 0)));
  Progress(absl::StrFormat("speculative: without drafts: OD-MoE %.1f, resident %.1f tokens/s",
                           plain.decode_tps, resident.decode_tps));
  json rows = json::array();
  for (int draft : o.drafts) {
    for (int64_t wait : {int64_t{0}, o.draft_wait_us}) {
      ODMOE_ASSIGN_OR_RETURN(Row r, measure("odmoe", drafting(draft, wait)));
      rows.push_back({{"draft_tokens", draft},
                      {"draft_wait_us", wait},
                      {"decode_tps", r.decode_tps},
                      {"over_odmoe", plain.decode_tps > 0 ? r.decode_tps / plain.decode_tps : 0},
                      {"over_resident",
                       resident.decode_tps > 0 ? r.decode_tps / resident.decode_tps : 0},
                      {"acceptance", r.acceptance},
                      {"tokens_per_iteration", r.tokens_per_iteration},
                      {"drafted", r.drafted}});
      Progress(absl::StrFormat(
          "speculative: %d drafts, wait %.0f ms: %.1f tokens/s (%.2fx OD-MoE, %.2fx resident), "
          "acceptance %.3f, %.2f tokens per iteration",
          draft, static_cast<double>(wait) / 1e3, r.decode_tps,
          rows.back()["over_odmoe"].get<double>(), rows.back()["over_resident"].get<double>(),
          r.acceptance, r.tokens_per_iteration));
    }
  }
  return json{{"odmoe_tps", plain.decode_tps},
              {"resident_tps", resident.decode_tps},
              {"odmoe_tokens_per_iteration", plain.tokens_per_iteration},
              {"output_tokens", o.speculative_tokens},
              {"prompts", prompts.size()},
              {"rows", rows}};
}

// ---- prefill: time to first token against the prefill mini-batch -------------

absl::StatusOr<json> Prefill(BenchContext& ctx) {
  const BenchOptions& o = ctx.options();
  json rows = json::array();
  for (int length : o.prefill_lengths) {
    ODMOE_ASSIGN_OR_RETURN(auto prompts, ctx.Prompts(length, o.prompts));
    double unbatched = 0;
    // The largest size first: a mini-batch of the whole prompt is no
    // mini-batching (every expert's rows in one message).
    std::vector<int> sizes = o.mini_batches;
    sizes.push_back(length);
    std::sort(sizes.begin(), sizes.end(), std::greater<int>());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    sizes.push_back(Topology::kAutoMiniBatch);  // last: chosen from the link and the costs
    for (int mb : sizes) {
      if (mb > length) continue;
      ODMOE_ASSIGN_OR_RETURN(
          ClusterProcess * cluster,
          ctx.Cluster(mb == Topology::kAutoMiniBatch ? std::string("odmoe-mbauto")
                                                     : absl::StrCat("odmoe-mb", mb)));
      ODMOE_ASSIGN_OR_RETURN(std::vector<RequestMetrics> runs,
                             RunWarm(ctx, *cluster, prompts, 2, ShadowAlignment(1, 1), "prefill"));
      std::vector<double> ttft;
      for (const RequestMetrics& m : runs) ttft.push_back(m.ttft_s);
      const MeanStd t = Summarize(ttft);
      if (mb == length) unbatched = t.mean;
      rows.push_back({{"prompt_tokens", length},
                      {"mini_batch", mb},
                      {"ttft_s", t.mean},
                      {"ttft_std_s", t.std},
                      {"over_unbatched", unbatched > 0 ? t.mean / unbatched : 1.0}});
      Progress(absl::StrFormat("prefill: %d-token prompt, mini-batch %s: TTFT %.1f ms (%.2fx "
                               "without mini-batches)",
                               length, mb == Topology::kAutoMiniBatch ? "auto" : absl::StrCat(mb),
                               t.mean * 1e3, rows.back()["over_unbatched"].get<double>()));
    }
  }
  return json{{"rows", rows}, {"prompts", o.prompts}};
}

}  // namespace

MeanStd Summarize(const std::vector<double>& values) {
  MeanStd s;
  std::vector<double> v;
  for (double x : values) {
    if (std::isfinite(x)) v.push_back(x);
  }
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= s.n;
  if (s.n > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(sq / (s.n - 1));
  }
  return s;
}

std::vector<std::pair<std::string, Experiment>> AllExperiments() {
  return {{"deployments", Deployments},
          {"load-sweep", LoadSweep},
          {"ablation", Ablation},
          {"periods", Periods},
          {"timing", Timing},
          {"recall", Recall},
          {"concurrency", Concurrency},
          {"speculative", Speculative},
          {"prefill", Prefill}};
}

absl::StatusOr<std::unique_ptr<BenchContext>> BenchContext::Create(const BenchOptions& options) {
  std::unique_ptr<BenchContext> ctx(new BenchContext());
  ctx->options_ = options;
  ODMOE_ASSIGN_OR_RETURN(ctx->base_, LoadTopology(options.topology_path));
  Topology& t = ctx->base_;
  if (options.port_base > 0) {
    if (options.attach) {
      return absl::InvalidArgumentError("--port-base renumbers started clusters; not with --attach");
    }
    int port = options.port_base;
    for (const NodeSpec* n : t.AllNodes()) {
      NodeSpec* node = const_cast<NodeSpec*>(n);
      if (!node->ssh.empty() || !node->netns.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--port-base works on local topologies; node ", node->id,
                         " runs over ssh or in a namespace"));
      }
      node->port = port++;
      node->address = absl::StrCat(node->host, ":", node->port);
    }
    t.main.http.clear();
    t.main.http_port = 0;
  }
  if (options.link_delay_us >= 0) {
    if (options.attach) {
      return absl::InvalidArgumentError("--link-delay sets started clusters' links; not with --attach");
    }
    t.wire_delay_us = options.link_delay_us;
  }
  if (options.link_bandwidth > 0) t.link_bandwidth = options.link_bandwidth;
  EngineOptions eo;
  eo.backend = "cpu:1";
  eo.n_ctx = t.main.context;
  eo.n_batch = t.main.batch;
  ODMOE_ASSIGN_OR_RETURN(ctx->reference_, ReferenceEngine::Create(t.model, eo));
  const std::string worker_backend = t.workers.empty() ? "cpu:1" : t.workers[0].backend;
  ODMOE_ASSIGN_OR_RETURN(ctx->compute_us_,
                         CalibrateExpertComputeUs(ctx->reference_->model(), worker_backend));
  // Layers may store their experts in different types: an average load.
  ctx->expert_bytes_ =
      static_cast<uint64_t>(std::llround(MeanPackedExpert(ctx->model_config())));
  if (options.load_bandwidth > 0) {
    ctx->load_bandwidth_ = options.load_bandwidth;
  } else {
    ctx->load_bandwidth_ = ctx->BandwidthForRatio(options.load_ratio);
  }
  if (options.attach) {
    ctx->running_name_ = "attached";
    ctx->running_ = ClusterProcess::Attach(t);
  }
  Progress(ctx->EmulationJson().dump());
  return ctx;
}

BenchContext::~BenchContext() { StopClusters(); }

json BenchContext::EmulationJson() const {
  const double load_us =
      load_bandwidth_ > 0 ? static_cast<double>(expert_bytes_) / load_bandwidth_ * 1e6 : 0;
  return {{"load_bandwidth_bytes_per_s", load_bandwidth_},
          {"load_emulated", load_bandwidth_ > 0 && !options_.attach},
          {"expert_bytes", expert_bytes_},
          {"expert_compute_us_calibrated", compute_us_},
          {"expert_load_us_emulated", load_us},
          {"load_over_compute", compute_us_ > 0 ? load_us / compute_us_ : 0},
          {"link_delay_us", base_.wire_delay_us},
          {"network", !options_.network.empty() ? options_.network
                      : options_.attach          ? "as deployed"
                      : base_.wire_delay_us > 0
                          ? absl::StrCat("loopback + emulated one-way delay of ",
                                         base_.wire_delay_us, " us per message")
                          : "loopback (no network emulation)"}};
}

absl::StatusOr<std::vector<std::vector<int32_t>>> BenchContext::Prompts(int n_tokens, int count) {
  auto key = std::make_pair(n_tokens, count);
  auto it = prompts_.find(key);
  if (it != prompts_.end()) return it->second;
  ODMOE_ASSIGN_OR_RETURN(auto p, HeldoutPrompts(reference_->tokenizer(), options_.heldout,
                                                n_tokens, count));
  prompts_[key] = p;
  return p;
}

absl::StatusOr<BenchContext::Reference> BenchContext::ReferenceRun(
    const std::vector<int32_t>& prompt, int max_tokens) {
  auto key = std::make_pair(prompt, max_tokens);
  auto it = references_.find(key);
  if (it != references_.end()) return it->second;
  GenerateRequest req;
  req.prompt_ids = prompt;
  req.max_tokens = max_tokens;
  req.ignore_eos = true;
  ODMOE_ASSIGN_OR_RETURN(GenerateResult r, reference_->Generate(req));
  Reference ref;
  ref.output_ids = r.output_ids;
  ref.decode_tps = r.stats.decode_tokens_per_second();
  ref.ttft_s = r.stats.ttft_seconds;
  const double total = r.stats.prefill_seconds + r.stats.decode_seconds;
  ref.output_tps = total > 0 ? r.stats.generated_tokens / total : 0;
  ODMOE_ASSIGN_OR_RETURN(ref.judged_ppl, JudgedPerplexity(prompt, ref.output_ids));
  references_[key] = ref;
  return ref;
}

absl::StatusOr<double> BenchContext::JudgedPerplexity(const std::vector<int32_t>& prompt,
                                                      const std::vector<int32_t>& output) {
  if (prompt.empty() || output.empty()) return 0.0;
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), output.begin(), output.end());
  ODMOE_ASSIGN_OR_RETURN(ScoreResult s,
                         reference_->Score(all, {.first = static_cast<int>(prompt.size()) - 1}));
  double sum = 0;
  for (double lp : s.next_logprobs) sum += lp;
  return s.next_logprobs.empty() ? 0.0
                                 : std::exp(-sum / static_cast<double>(s.next_logprobs.size()));
}

uint64_t BenchContext::BandwidthForRatio(double ratio) const {
  if (ratio <= 0 || compute_us_ <= 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(expert_bytes_) / (ratio * compute_us_ * 1e-6));
}

absl::StatusOr<Topology> BenchContext::DeploymentTopology(const std::string& name,
                                                          uint64_t load_bandwidth) const {
  Topology t = base_;
  for (WorkerSpec& w : t.workers) w.load_bandwidth = load_bandwidth;
  // The concurrency experiment's clients all run at once.
  for (int n : options_.clients) t.main.max_running = std::max(t.main.max_running, n);
  auto shadow_with = [&](DType q) -> absl::StatusOr<Topology> {
    if (!t.shadow) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.topology_path, ": the benchmark needs a shadow section for '", name, "'"));
    }
    t.prediction = PredictionMode::kShadow;
    t.worker_mode = WorkerMode::kOnDemand;
    if (t.shadow->quantization != q) t.shadow->model.clear();
    t.shadow->quantization = q;
    t.shadow->token_period = 1;
    t.shadow->kv_period = 1;
    return t;
  };
  if (name == "odmoe") return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  if (absl::StartsWith(name, "odmoe-mb")) {
    // odmoe-mb<N>: OD-MoE with prefill.mini_batch N (the prefill experiment).
    // odmoe-mbauto: prefill.mini_batch auto.
    int mb = 0;
    if (name.substr(8) == "auto") {
      mb = Topology::kAutoMiniBatch;
    } else if (!absl::SimpleAtoi(name.substr(8), &mb) || mb < 1 || mb > (1 << 16)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown deployment '", name, "'"));
    }
    t.prefill_mini_batch = mb;
    return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  }
  if (name == "odmoe-host") {
    // DAOP's compute on a miss, the host emulated --host-slowdown x slower
    // than the workers' "device".
    t.host_compute = true;
    t.host_compute_slowdown = options_.host_slowdown;
    return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  }
  if (name == "odmoe-mixed") {
    // DyMoE's mixed precision (lossy): sub-critical experts from a q4_0 copy,
    // with --mixed-floor the retention ratio at the last layer.
    t.mixed_precision = MixedPrecisionSpec{.type = DType::kQ4_0, .floor = options_.mixed_floor};
    return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  }
  if (name == "odmoe-degrade") {
    t.degrade = true;  // DAOP's graceful degradation (lossy)
    return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  }
  if (name == "odmoe-sub") {
    t.sub_expert = true;  // FIRM's sub-expert streaming of a miss
    return shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0);
  }
  if (absl::StartsWith(name, "shadow-")) {
    // shadow-<type>: a shadow that quantizes its copy to the type
    // (shadow.quantization's values).
    const std::optional<DType> q = ParseDType(name.substr(7));
    for (DType allowed : {DType::kF16, DType::kQ8_0, DType::kQ6_K, DType::kQ5_K, DType::kQ4_K,
                          DType::kQ4_0}) {
      if (q == allowed) return shadow_with(allowed);
    }
  }
  if (name == "utility") {
    // MoE-SpAc's utility-driven cache, fed by the shadow: shaped as the
    // caching baselines (one group of k workers, lru_experts slots each).
    t.worker_mode = WorkerMode::kUtilityCache;
    t.cache_experts = options_.lru_experts;
    t.workers.resize(static_cast<size_t>(t.group_size));
    ODMOE_ASSIGN_OR_RETURN(Topology u,
                           shadow_with(base_.shadow ? base_.shadow->quantization : DType::kQ8_0));
    u.worker_mode = WorkerMode::kUtilityCache;
    return u;
  }
  if (name == "resident" || name == "lru" || name == "lfu") {
    t.prediction = PredictionMode::kNone;
    t.shadow.reset();
    if (name == "resident") {
      t.worker_mode = WorkerMode::kResident;
    } else {
      // The caching baselines: one group (k workers, one per routed expert),
      // each keeping lru_experts experts, evicting the least recently (lru)
      // or least often (lfu) used.
      t.worker_mode = name == "lru" ? WorkerMode::kLruCache : WorkerMode::kLfuCache;
      t.cache_experts = options_.lru_experts;
      t.workers.resize(static_cast<size_t>(t.group_size));
    }
    return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown deployment '", name, "'"));
}

absl::StatusOr<ClusterProcess*> BenchContext::Cluster(const std::string& name) {
  return Cluster(name, load_bandwidth_);
}

absl::StatusOr<ClusterProcess*> BenchContext::Cluster(const std::string& name,
                                                      uint64_t load_bandwidth) {
  if (options_.attach) return running_.get();
  // shadow-<odmoe's quantization> is the odmoe deployment itself.
  std::string want = name;
  if (base_.shadow &&
      absl::AsciiStrToLower(name) ==
          absl::AsciiStrToLower(absl::StrCat("shadow-", ToAbsl(Traits(base_.shadow->quantization).name)))) {
    want = "odmoe";
  }
  // Resident workers load once, at start: the cap does not matter to them.
  if (want == "resident") load_bandwidth = load_bandwidth_;
  const std::string key = absl::StrCat(want, "@", load_bandwidth);
  if (running_ && running_name_ == key) return running_.get();
  StopClusters();
  ODMOE_ASSIGN_OR_RETURN(Topology t, DeploymentTopology(want, load_bandwidth));
  Progress(absl::StrFormat("starting deployment '%s' (%d workers, %s, prediction %s, loads %s)",
                           want, t.n_workers(), std::string(WorkerModeName(t.worker_mode)),
                           std::string(PredictionModeName(t.prediction)),
                           load_bandwidth ? absl::StrFormat("capped at %.1f MB/s",
                                                            load_bandwidth / 1e6)
                                          : std::string("uncapped")));
  ODMOE_ASSIGN_OR_RETURN(running_, ClusterProcess::Start(t, want, options_.out_dir + "/run",
                                                         options_.bin_dir,
                                                         options_.start_timeout));
  running_name_ = key;
  return running_.get();
}

void BenchContext::StopClusters() {
  if (running_ && !options_.attach) {
    running_->Stop();
    running_.reset();
    running_name_.clear();
  }
}

absl::StatusOr<json> BenchContext::MemoryJson(const std::string& name) {
  ODMOE_ASSIGN_OR_RETURN(ClusterProcess * cluster, Cluster(name));
  ODMOE_ASSIGN_OR_RETURN(std::vector<NodeCounters> nodes, cluster->Snapshot());
  json out = json::array();
  for (const NodeCounters& n : nodes) {
    json j = {{"node", n.id},
              {"role", n.role},
              {"process_peak_rss_bytes", static_cast<double>(n.process.peak_rss_bytes())}};
    if (n.worker) {
      j["expert_memory_peak_bytes"] = static_cast<double>(n.worker->memory_peak_bytes());
      j["experts_held_peak"] = static_cast<double>(n.worker->experts_held_peak());
      j["expert_bytes"] = static_cast<double>(n.worker->expert_bytes());
      j["memory_budget_bytes"] = static_cast<double>(n.worker->memory_budget_bytes());
      j["mode"] = WorkerMemoryModeName(n.worker->mode());
    }
    out.push_back(j);
  }
  return out;
}

absl::StatusOr<RequestMetrics> BenchContext::Run(ClusterProcess& cluster, const RequestSpec& spec,
                                                 bool* exact) {
  ODMOE_ASSIGN_OR_RETURN(RequestMetrics m, RunRequest(cluster, spec));
  ODMOE_ASSIGN_OR_RETURN(Reference ref, ReferenceRun(spec.prompt_ids, spec.max_tokens));
  *exact = m.output_ids == ref.output_ids;
  size_t same = 0;
  for (size_t i = 0; i < std::min(m.output_ids.size(), ref.output_ids.size()); ++i) {
    same += m.output_ids[i] == ref.output_ids[i] ? 1 : 0;
  }
  m.agreement = ref.output_ids.empty() ? 1.0
                                       : static_cast<double>(same) /
                                             static_cast<double>(ref.output_ids.size());
  m.reference_judged_ppl = ref.judged_ppl;
  if (*exact) {
    m.judged_ppl = ref.judged_ppl;
  } else {
    ODMOE_ASSIGN_OR_RETURN(m.judged_ppl, JudgedPerplexity(spec.prompt_ids, m.output_ids));
  }
  ++experiment_requests_;
  if (!experiment_.empty()) {
    Running(absl::StrFormat("%s: %d request%s, %.0f s; last %.1f tokens/s (%s)", experiment_,
                            experiment_requests_, experiment_requests_ == 1 ? "" : "s",
                            std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                          experiment_start_)
                                .count(),
                            m.decode_tps, m.prediction));
  }
  if (!*exact) {
    Progress(absl::StrCat("WARNING: the cluster's tokens differ from the reference engine's (",
                          m.prediction, ", ", spec.prompt_ids.size(), " prompt tokens)"));
  }
  return m;
}

void BenchContext::BeginExperiment(const std::string& name, int index, int count) {
  experiment_ = absl::StrFormat("[%d/%d] %s", index, count, name);
  experiment_start_ = std::chrono::steady_clock::now();
  experiment_requests_ = 0;
  Progress(absl::StrCat(experiment_, ": started"));
}

void BenchContext::EndExperiment(bool ok) {
  Progress(absl::StrFormat(
      "%s: %s %.0f s (%d request%s)", experiment_, ok ? "done in" : "FAILED after",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - experiment_start_).count(),
      experiment_requests_, experiment_requests_ == 1 ? "" : "s"));
  experiment_.clear();
}

}  // namespace odmoe::bench
