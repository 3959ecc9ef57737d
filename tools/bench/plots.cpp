#include "bench/plots.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/charts.h"
#include "bench/gnuplot_chart.h"
#include "util/status_macros.h"

namespace odmoe::bench {
namespace {

using json = nlohmann::json;

double Num(const json& j, const std::string& key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

double NumAt(const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }

absl::Status Save(absl::StatusOr<Canvas> canvas, const std::string& out_dir,
                  const std::string& name, std::vector<std::string>* files) {
  if (!canvas.ok()) return canvas.status();
  ODMOE_RETURN_IF_ERROR(canvas->WritePng(out_dir + "/" + name));
  files->push_back(name);
  return absl::OkStatus();
}

// Each chart through gnuplot where it is installed (gnuplot_chart.h), else
// through the built-in rasterizer (charts.h).
absl::Status DrawLine(const ChartText& t, const std::vector<Series>& series,
                      std::optional<double> y_min, std::optional<double> y_max, bool log_x,
                      const std::string& out_dir, const std::string& name,
                      std::vector<std::string>* files) {
  if (!GnuplotAvailable()) return Save(LineChart(t, series, y_min, y_max, log_x), out_dir, name, files);
  ODMOE_RETURN_IF_ERROR(GnuplotLineChart(t, series, y_min, y_max, log_x, out_dir + "/" + name));
  files->push_back(name);
  return absl::OkStatus();
}

absl::Status DrawBars(const ChartText& t, const std::vector<std::string>& series,
                      const std::vector<BarGroup>& groups, const std::string& out_dir,
                      const std::string& name, std::vector<std::string>* files) {
  if (!GnuplotAvailable()) return Save(BarChart(t, series, groups), out_dir, name, files);
  ODMOE_RETURN_IF_ERROR(GnuplotBarChart(t, series, groups, out_dir + "/" + name));
  files->push_back(name);
  return absl::OkStatus();
}

absl::Status DrawHeat(const ChartText& t, const std::vector<std::string>& rows,
                      const std::vector<std::string>& cols,
                      const std::vector<std::vector<double>>& values, const std::string& out_dir,
                      const std::string& name, std::vector<std::string>* files) {
  if (!GnuplotAvailable()) return Save(HeatMap(t, rows, cols, values), out_dir, name, files);
  ODMOE_RETURN_IF_ERROR(GnuplotHeatMap(t, rows, cols, values, out_dir + "/" + name));
  files->push_back(name);
  return absl::OkStatus();
}

// Fig. 3: one chart per shadow precision, a curve per alignment mode.
absl::Status RecallPlots(const json& recall, const std::string& out_dir,
                         std::vector<std::string>* files) {
  for (const auto& [shadow, modes] : recall.items()) {
    std::vector<Series> series;
    for (const auto& [mode, r] : modes.items()) {
      if (!r.contains("per_token")) continue;
      Series s;
      s.name = absl::StrCat(mode, " (", static_cast<int>(std::lround(Num(r, "recall") * 1000)) / 10.0,
                            "%)");
      for (size_t i = 0; i < r["per_token"].size(); ++i) {
        s.x.push_back(static_cast<double>(i + 1));
        s.y.push_back(NumAt(r["per_token"][i]));
      }
      series.push_back(std::move(s));
    }
    if (series.empty()) continue;
    ODMOE_RETURN_IF_ERROR(DrawLine({absl::StrCat("Recall per output token, ", shadow),
                                    "output token index", "recall (Eq. 2)"},
                                   series, 0.0, 1.0, false, out_dir,
                                   absl::StrCat("recall-", shadow, ".png"), files));
  }
  return absl::OkStatus();
}

absl::Status DeploymentPlot(const json& d, const std::string& out_dir,
                            std::vector<std::string>* files) {
  std::vector<std::string> names;
  std::vector<std::string> configs;
  for (const auto& [name, per_config] : d["results"].items()) {
    // The in-process reference engine (no network, no processes) is in the
    // table; on the chart it would dwarf the cluster deployments.
    if (name == "reference") continue;
    names.push_back(name);
    if (configs.empty()) {
      for (const auto& [config, r] : per_config.items()) configs.push_back(config);
    }
  }
  std::vector<BarGroup> groups;
  for (const std::string& config : configs) {
    BarGroup g;
    g.label = config;
    for (const std::string& name : names) {
      const json& r = d["results"][name];
      g.values.push_back(r.contains(config) ? Num(r[config], "decode_tps") : std::nan(""));
      g.errors.push_back(r.contains(config) ? Num(r[config], "decode_tps_std") : std::nan(""));
    }
    groups.push_back(std::move(g));
  }
  return DrawBars({"Decode throughput by deployment (cluster)", "prompt x output tokens",
                   "decode tokens/s"},
                  names, groups, out_dir, "deployments.png", files);
}

absl::Status AblationPlot(const json& a, const std::string& out_dir,
                          std::vector<std::string>* files) {
  std::vector<BarGroup> groups;
  for (const json& c : a["cases"]) {
    BarGroup g;
    g.label = c.value("case", "").substr(0, c.value("case", "").find(':'));
    g.values = {Num(c, "decode_tps")};
    g.errors = {Num(c, "decode_tps_std")};
    groups.push_back(std::move(g));
  }
  return DrawBars({absl::StrCat("Ablation cases 1-6 (", a.value("config", ""), ")"),
                   "case (1 token+KV, 2 token, 3 KV, 4 none, 5 random, 6 no prefetch)",
                   "decode tokens/s"},
                  {"decode"}, groups, out_dir, "ablation.png", files);
}

absl::Status PeriodsPlot(const json& p, const std::string& out_dir,
                         std::vector<std::string>* files) {
  std::vector<std::string> rows, cols;
  for (const json& v : p["periods"]) {
    rows.push_back(absl::StrCat("token ", v.get<int>()));
    cols.push_back(absl::StrCat("KV ", v.get<int>()));
  }
  std::vector<std::vector<double>> values;
  for (const json& row : p["decode_tps"]) {
    std::vector<double> r;
    for (const json& v : row) r.push_back(NumAt(v));
    values.push_back(std::move(r));
  }
  return DrawHeat({absl::StrCat("Decode tokens/s by alignment period (", p.value("config", ""),
                                ")"),
                   "KV alignment period", "token alignment period"},
                  rows, cols, values, out_dir, "periods.png", files);
}

absl::Status SweepPlot(const json& s, const std::string& out_dir,
                       std::vector<std::string>* files) {
  // Every policy the sweep measured (older results have the first four).
  const std::pair<const char*, const char*> known[] = {
      {"odmoe_tps", "OD-MoE (shadow)"},        {"none_tps", "none (load after gate)"},
      {"lru_tps", "LRU cache"},                {"resident_tps", "resident"},
      {"lookahead_tps", "gate look-ahead"},    {"odmoe_sub_tps", "OD-MoE + sub-expert"},
      {"none_sub_tps", "none + sub-expert"},   {"odmoe_host_tps", "OD-MoE + host compute"},
      {"lfu_tps", "LFU cache"},                {"utility_tps", "utility cache (MoE-SpAc)"},
      {"odmoe_mixed_tps", "OD-MoE + mixed precision (lossy)"},
      {"odmoe_degrade_tps", "OD-MoE + degradation (lossy)"}};
  std::vector<Series> series;
  for (const auto& [key, label] : known) {
    if (s["rows"].empty() || !s["rows"][0].contains(key)) continue;
    Series one{label, {}, {}};
    for (const json& row : s["rows"]) {
      one.x.push_back(Num(row, "load_us"));
      one.y.push_back(Num(row, key));
    }
    series.push_back(std::move(one));
  }
  return DrawLine({absl::StrCat("Decode throughput vs emulated expert load time (",
                                s.value("config", ""), ")"),
                   "expert load time (us, log scale)", "decode tokens/s"},
                  series, 0.0, std::nullopt, /*log_x=*/true, out_dir, "load-sweep.png", files);
}

}  // namespace

absl::Status WritePlots(const json& results, const std::string& out_dir,
                        std::vector<std::string>* files) {
  auto ok = [&](const char* key) {
    return results.contains(key) && results[key].is_object() && !results[key].contains("error");
  };
  if (ok("deployments")) ODMOE_RETURN_IF_ERROR(DeploymentPlot(results["deployments"], out_dir, files));
  if (ok("load-sweep")) ODMOE_RETURN_IF_ERROR(SweepPlot(results["load-sweep"], out_dir, files));
  if (ok("recall")) ODMOE_RETURN_IF_ERROR(RecallPlots(results["recall"], out_dir, files));
  if (ok("ablation")) ODMOE_RETURN_IF_ERROR(AblationPlot(results["ablation"], out_dir, files));
  if (ok("periods")) ODMOE_RETURN_IF_ERROR(PeriodsPlot(results["periods"], out_dir, files));
  return absl::OkStatus();
}

}  // namespace odmoe::bench
