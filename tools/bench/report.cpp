#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>


namespace odmoe::bench {
namespace {

using json = nlohmann::json;

double Num(const json& j, const std::string& key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

// A number that may be null (not measured).
double NumAt(const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }

// A number for a table cell ("-" when it was not measured).
std::string F(double v, const char* fmt = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

void Deployments(const json& d, std::ostringstream& out) {
  out << "## Deployments side by side\n\n";
  if (d.contains("headline")) {
    for (const auto& [k, v] : d["headline"].items()) {
      out << "- decode throughput " << k << ": **" << F(NumAt(v), "%.3f") << "**\n";
    }
    out << "\n";
  }
  out << "| deployment | config | TTFT ms | decode tok/s | output tok/s | recall | stall ms/token "
         "| stall ms/miss | loaded KiB/token | network KiB/token | hits | misses | host computes "
         "| same tokens as reference |\n"
      << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const auto& [name, configs] : d["results"].items()) {
    for (const auto& [config, r] : configs.items()) {
      out << "| " << name << " | " << config << " | " << F(Num(r, "ttft_s") * 1e3) << " | "
          << F(Num(r, "decode_tps")) << " ± " << F(Num(r, "decode_tps_std")) << " | "
          << F(Num(r, "output_tps")) << " | " << F(Num(r, "recall"), "%.3f") << " | "
          << F(Num(r, "stall_per_token_s") * 1e3, "%.3f") << " | "
          << F(Num(r, "stall_per_miss_s") * 1e3, "%.3f") << " | "
          << F(Num(r, "bytes_loaded_per_token") / 1024) << " | "
          << F(Num(r, "network_bytes_per_token") / 1024) << " | " << F(Num(r, "hits"), "%.0f")
          << " | " << F(Num(r, "misses"), "%.0f") << " | " << F(Num(r, "host_computes"), "%.0f")
          << " | " << (r.value("exact", false) ? "yes" : "**NO**") << " |\n";
    }
  }
  // The lossy policies: how far from the single process they are.
  auto lossy_row = [](const json& r) {
    return !r.value("exact", true) || Num(r, "substitutions") > 0 || Num(r, "low_precision") > 0;
  };
  bool lossy = false;
  for (const auto& [name, configs] : d["results"].items()) {
    for (const auto& [config, r] : configs.items()) lossy = lossy || lossy_row(r);
  }
  if (lossy) {
    out << "\nThe lossy deployments against the single process's greedy run (agreement: share "
           "of output positions with its token; judged PPL: the lossless model's perplexity of "
           "the output, its own output's next to it):\n\n"
        << "| deployment | config | agreement | judged PPL | single process's judged PPL | "
           "substitutions | low-precision tasks |\n|---|---|--:|--:|--:|--:|--:|\n";
    for (const auto& [name, configs] : d["results"].items()) {
      for (const auto& [config, r] : configs.items()) {
        if (!r.contains("agreement") || !lossy_row(r)) continue;
        out << "| " << name << " | " << config << " | " << F(Num(r, "agreement"), "%.3f") << " | "
            << F(Num(r, "judged_ppl"), "%.3f") << " | " << F(Num(r, "reference_judged_ppl"), "%.3f")
            << " | " << F(Num(r, "substitutions"), "%.0f") << " | "
            << F(Num(r, "low_precision"), "%.0f") << " |\n";
      }
    }
  }
  out << "\nPeak memory per node (process resident set; workers also their expert slots):\n\n"
      << "| deployment | node | role | peak RSS MiB | expert memory peak KiB | experts held "
         "at most | expert KiB |\n|---|---|---|--:|--:|--:|--:|\n";
  for (const auto& [name, nodes] : d["memory"].items()) {
    for (const json& n : nodes) {
      out << "| " << name << " | " << n.value("node", "") << " | " << n.value("role", "") << " | "
          << F(Num(n, "process_peak_rss_bytes") / 1048576) << " | "
          << F(Num(n, "expert_memory_peak_bytes") / 1024) << " | "
          << F(Num(n, "experts_held_peak"), "%.0f") << " | " << F(Num(n, "expert_bytes") / 1024)
          << " |\n";
    }
  }
  out << "\n";
}

void Recall(const json& r, std::ostringstream& out) {
  out << "## Recall (Eq. 3) by shadow precision and alignment\n\n"
      << "| shadow | no alignment | token | token + KV | tokens identical |\n|---|--:|--:|--:|---|\n";
  for (const auto& [name, modes] : r.items()) {
    if (name == "lookahead") continue;  // not a shadow: below
    bool exact = true;
    out << "| " << name;
    for (const std::string m : {"no alignment", "token", "token+kv"}) {
      out << " | " << (modes.contains(m) ? F(Num(modes[m], "recall"), "%.4f") : "-");
      if (modes.contains(m)) exact = exact && modes[m].value("exact", false);
    }
    out << " | " << (exact ? "yes" : "**NO**") << " |\n";
  }
  if (r.contains("lookahead") && r["lookahead"].is_object() && !r["lookahead"].empty()) {
    out << "\nGate look-ahead on the main node (no shadow; layer l+1 predicted from MoE inputs "
           "of layer l and, voting, the layers before it; recall over the (token, layer) pairs "
           "predicted, the others counted as missing):\n\n"
        << "| variant | recall | pairs not predicted | tokens identical |\n|---|--:|--:|---|\n";
    for (const auto& [name, g] : r["lookahead"].items()) {
      out << "| " << name << " | " << F(Num(g, "recall"), "%.4f") << " | "
          << F(Num(g, "predictions_missing"), "%.0f") << " | "
          << (g.value("exact", false) ? "yes" : "**NO**") << " |\n";
    }
  }
  // Recall by depth: each predictor's recall at each layer ("-": never predicted).
  std::vector<std::pair<std::string, const json*>> by_layer;
  size_t layers = 0;
  for (const auto& [name, modes] : r.items()) {
    for (const auto& [mode, g] : modes.items()) {
      if (!g.is_object() || !g.contains("per_layer") || !g["per_layer"].is_array()) continue;
      if (name != "lookahead" && mode != "token+kv") continue;  // shadows: aligned only
      by_layer.push_back({name == "lookahead" ? mode : name + " (token + KV)", &g["per_layer"]});
      layers = std::max(layers, g["per_layer"].size());
    }
  }
  if (!by_layer.empty() && layers > 0) {
    out << "\nRecall by layer (depth):\n\n| predictor |";
    for (size_t l = 0; l < layers; ++l) out << " " << l << " |";
    out << "\n|---|";
    for (size_t l = 0; l < layers; ++l) out << "--:|";
    out << "\n";
    for (const auto& [name, per_layer] : by_layer) {
      out << "| " << name << " |";
      for (size_t l = 0; l < layers; ++l) {
        const bool has = l < per_layer->size() && (*per_layer)[l].is_number();
        out << " " << (has ? F((*per_layer)[l].get<double>(), "%.3f") : std::string("-")) << " |";
      }
      out << "\n";
    }
  }
  out << "\n";
}

void Ablation(const json& a, std::ostringstream& out) {
  out << "## Ablation (paper §4.2, config " << a.value("config", "") << ")\n\n"
      << "| case | decode tok/s | ± std | recall | stall ms/token |\n|---|--:|--:|--:|--:|\n";
  for (const json& c : a["cases"]) {
    out << "| " << c.value("case", "") << " | " << F(Num(c, "decode_tps")) << " | "
        << F(Num(c, "decode_tps_std")) << " | " << F(Num(c, "recall"), "%.3f") << " | "
        << F(Num(c, "stall_per_token_s") * 1e3, "%.3f") << " |\n";
  }
  out << "\n";
}

void Periods(const json& p, std::ostringstream& out) {
  out << "## Alignment periods (decode tok/s; rows: token period, columns: KV period; config "
      << p.value("config", "") << ")\n\n|  |";
  for (const json& k : p["periods"]) out << " KV " << k.get<int>() << " |";
  out << "\n|---|";
  for (size_t i = 0; i < p["periods"].size(); ++i) out << "--:|";
  out << "\n";
  for (size_t i = 0; i < p["periods"].size(); ++i) {
    out << "| token " << p["periods"][i].get<int>() << " |";
    for (size_t j = 0; j < p["periods"].size(); ++j) {
      out << " " << F(NumAt(p["decode_tps"][i][j])) << " (" << F(NumAt(p["recall"][i][j]), "%.2f")
          << ") |";
    }
    out << "\n";
  }
  out << "\n(recall in parentheses)\n\n";
}

void Timing(const json& t, std::ostringstream& out) {
  out << "## Timing model (Eq. 1: t^maxload = G t^M + (G-1) t^W)\n\n"
      << "| run | G | t^M us | t^W us | head us/token | expert load us | expert compute us | "
         "t^maxload us | verdict | trace |\n|---|--:|--:|--:|--:|--:|--:|--:|---|---|\n";
  for (const auto& [name, m] : t.items()) {
    out << "| " << name << " | " << F(Num(m, "groups"), "%.0f") << " | "
        << F(Num(m, "t_main_us"), "%.0f") << " | " << F(Num(m, "t_worker_us"), "%.0f") << " | "
        << F(Num(m, "t_head_us"), "%.0f") << " | " << F(Num(m, "t_load_us"), "%.0f") << " | "
        << F(Num(m, "t_compute_us"), "%.0f") << " | " << F(Num(m, "t_maxload_us"), "%.0f")
        << " | " << (m.value("io_bound", false) ? "I/O-bound" : "not I/O-bound") << " | "
        << m.value("trace_file", "") << " |\n";
  }
  out << "\n";
}

void Concurrency(const json& c, std::ostringstream& out) {
  out << "## Concurrency (clients at once, " << c.value("prompt_tokens", 0) << "-token prompts, "
      << c.value("output_tokens", 0) << " output tokens each)\n\n"
      << "| clients | output tok/s in all | x one client | TTFT p50 / p99 ms | inter-token p50 / "
         "p99 ms | recall | hit rate | exact |\n|--:|--:|--:|--:|--:|--:|--:|---|\n";
  for (const json& l : c["levels"]) {
    out << "| " << F(Num(l, "clients"), "%.0f") << " | " << F(Num(l, "output_tps")) << " | "
        << F(Num(l, "over_one_client"), "%.2f") << " | " << F(Num(l, "ttft_p50_s") * 1e3, "%.0f")
        << " / " << F(Num(l, "ttft_p99_s") * 1e3, "%.0f") << " | "
        << F(Num(l, "itl_p50_s") * 1e3, "%.1f") << " / " << F(Num(l, "itl_p99_s") * 1e3, "%.1f")
        << " | " << F(Num(l, "recall"), "%.3f") << " | " << F(Num(l, "hit_rate"), "%.3f") << " | "
        << (l.value("exact", false) ? "yes" : "NO") << " |\n";
  }
  out << "\n";
  if (c.value("draft_tokens", 0) <= 0) return;
  out << "With " << c.value("draft_tokens", 0)
      << " drafted tokens per request and iteration (the shadow drafts; several requests' drafts "
         "verified in one iteration):\n\n"
      << "| clients | output tok/s in all | x without drafts | acceptance | inter-token p50 ms | "
         "exact |\n|--:|--:|--:|--:|--:|---|\n";
  for (const json& l : c["levels"]) {
    if (!l.contains("with_drafts")) continue;
    const json& w = l["with_drafts"];
    out << "| " << F(Num(l, "clients"), "%.0f") << " | " << F(Num(w, "output_tps")) << " | "
        << F(Num(w, "over_no_drafts"), "%.2f") << " | " << F(Num(w, "acceptance"), "%.3f")
        << " | " << F(Num(w, "itl_p50_s") * 1e3, "%.1f") << " | "
        << (w.value("exact", false) ? "yes" : "NO") << " |\n";
  }
  out << "\n";
}

void Speculative(const json& c, std::ostringstream& out) {
  out << "## Speculative decoding (the shadow drafts; " << c.value("prompts", 0) << " prompts x "
      << c.value("output_tokens", 0) << " tokens, greedy)\n\n"
      << "Without drafts: OD-MoE " << F(Num(c, "odmoe_tps")) << " tokens/s, resident "
      << F(Num(c, "resident_tps")) << " tokens/s.\n\n"
      << "| drafts | wait ms | decode tok/s | x OD-MoE | x resident | acceptance | tokens / "
         "iteration |\n|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const json& r : c["rows"]) {
    out << "| " << F(Num(r, "draft_tokens"), "%.0f") << " | "
        << F(Num(r, "draft_wait_us") / 1e3, "%.0f") << " | " << F(Num(r, "decode_tps")) << " | "
        << F(Num(r, "over_odmoe"), "%.2f") << " | " << F(Num(r, "over_resident"), "%.2f") << " | "
        << F(Num(r, "acceptance"), "%.3f") << " | " << F(Num(r, "tokens_per_iteration"), "%.2f")
        << " |\n";
  }
  out << "\n";
}

void Prefill(const json& c, std::ostringstream& out) {
  out << "## Prefill: time to first token against prefill.mini_batch (" << c.value("prompts", 0)
      << " prompts each)\n\n| prompt tokens | mini-batch | TTFT ms | x without mini-batches "
         "|\n|--:|--:|--:|--:|\n";
  for (const json& r : c["rows"]) {
    const bool whole = Num(r, "mini_batch") == Num(r, "prompt_tokens");
    const bool chosen = Num(r, "mini_batch") == 0;  // prefill.mini_batch: auto
    out << "| " << F(Num(r, "prompt_tokens"), "%.0f") << " | "
        << (whole ? std::string("none") : chosen ? std::string("auto") : F(Num(r, "mini_batch"), "%.0f"))
        << " | "
        << F(Num(r, "ttft_s") * 1e3, "%.1f") << " | " << F(Num(r, "over_unbatched"), "%.2f")
        << " |\n";
  }
  out << "\n";
}

void LoadSweep(const json& s, std::ostringstream& out) {
  out << "## Load sweep: decode tokens/s against the emulated load time (" << s.value("config", "")
      << ")\n\n";
  if (!s.contains("rows") || s["rows"].empty()) return;
  std::vector<std::string> keys;  // <policy>_tps, in the sweep's order
  for (const auto& [key, v] : s["rows"][0].items()) {
    if (key.size() > 4 && key.substr(key.size() - 4) == "_tps") keys.push_back(key);
  }
  out << "| load / compute | load us";
  for (const std::string& k : keys) out << " | " << k.substr(0, k.size() - 4);
  out << " |\n|--:|--:";
  for (size_t i = 0; i < keys.size(); ++i) out << "|--:";
  out << "|\n";
  for (const json& r : s["rows"]) {
    out << "| " << F(Num(r, "load_over_compute"), "%.0f") << " | " << F(Num(r, "load_us"), "%.0f");
    for (const std::string& k : keys) out << " | " << F(Num(r, k));
    out << " |\n";
  }
  out << "\n";
}

}  // namespace

std::string MarkdownSummary(const json& results) {
  std::ostringstream out;
  out << "# odmoe-bench results\n\n";
  if (results.contains("meta")) {
    const json& m = results["meta"];
    out << "- model: " << m.value("model", "") << "\n- topology: " << m.value("topology", "")
        << "\n- mode: " << (m.value("quick", false) ? "quick" : "full")
        << "\n- started: " << m.value("started", "") << ", took "
        << F(Num(m, "seconds"), "%.0f") << " s\n";
  }
  if (results.contains("emulation")) {
    const json& e = results["emulation"];
    out << "- emulation: expert loads capped at "
        << F(Num(e, "load_bandwidth_bytes_per_s") / 1e6) << " MB/s ("
        << F(Num(e, "expert_load_us_emulated"), "%.0f") << " us per "
        << F(Num(e, "expert_bytes") / 1024) << " KiB expert = "
        << F(Num(e, "load_over_compute")) << " x the calibrated compute of "
        << F(Num(e, "expert_compute_us_calibrated")) << " us); network: "
        << e.value("network", "") << "\n";
  }
  out << "\n";
  using Section = void (*)(const json&, std::ostringstream&);
  const std::pair<const char*, Section> sections[] = {{"deployments", &Deployments},
                                                      {"load-sweep", &LoadSweep},
                                                      {"recall", &Recall},
                                                      {"ablation", &Ablation},
                                                      {"periods", &Periods},
                                                      {"timing", &Timing},
                                                      {"concurrency", &Concurrency},
                                                      {"speculative", &Speculative},
                                                      {"prefill", &Prefill}};
  for (const auto& [name, write] : sections) {
    if (!results.contains(name)) continue;
    const json& r = results[name];
    if (!r.is_object() || r.contains("error")) {  // a failed experiment: say so, draw nothing
      out << "## " << name << ": failed\n\n"
          << (r.is_object() && r["error"].is_string() ? r["error"].get<std::string>()
                                                       : std::string("no results"))
          << "\n\n";
      continue;
    }
    write(r, out);
  }
  return out.str();
}

}  // namespace odmoe::bench
