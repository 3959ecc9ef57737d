// odmoe-bench's charts drawn by gnuplot (Debian's gnuplot-nox; pngcairo with
// DejaVu Sans): real fonts, lower case, axis units, and the legend outside
// the plot area so it never covers data. Each chart is a self-contained
// gnuplot script with its data inline, saved next to its PNG ("recall.gp"
// beside "recall.png"), so a reader can restyle and redraw it. The same
// inputs as charts.h's own rasterizer, which plots.cpp uses only where
// gnuplot is not installed.
//
//   if (GnuplotAvailable()) {
//     ChartText t{"Recall", "output token", "recall"};
//     ODMOE_RETURN_IF_ERROR(GnuplotLineChart(t, {{"token+kv", xs, ys}}, 0.0, 1.0, false,
//                                            "out/recall.png"));   // also out/recall.gp
//   }
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bench/charts.h"

namespace odmoe::bench {

/// True when `gnuplot` runs and has the pngcairo terminal (checked once).
bool GnuplotAvailable();

/// The script for a chart (what the functions below write and run); exposed
/// for tests. `png_path` is where the script's output goes.
std::string GnuplotLineScript(const ChartText& text, const std::vector<Series>& series,
                              std::optional<double> y_min, std::optional<double> y_max,
                              bool log_x, const std::string& png_path);
std::string GnuplotBarScript(const ChartText& text, const std::vector<std::string>& series,
                             const std::vector<BarGroup>& groups, const std::string& png_path);
std::string GnuplotHeatScript(const ChartText& text, const std::vector<std::string>& rows,
                              const std::vector<std::string>& cols,
                              const std::vector<std::vector<double>>& values,
                              const std::string& png_path);

/// Write "<png_path minus .png>.gp" and run gnuplot on it. INVALID_ARGUMENT
/// for empty data (as charts.h), INTERNAL with gnuplot's output when it fails.
absl::Status GnuplotLineChart(const ChartText& text, const std::vector<Series>& series,
                              std::optional<double> y_min, std::optional<double> y_max,
                              bool log_x, const std::string& png_path);
absl::Status GnuplotBarChart(const ChartText& text, const std::vector<std::string>& series,
                             const std::vector<BarGroup>& groups, const std::string& png_path);
absl::Status GnuplotHeatMap(const ChartText& text, const std::vector<std::string>& rows,
                            const std::vector<std::string>& cols,
                            const std::vector<std::vector<double>>& values,
                            const std::string& png_path);

}  // namespace odmoe::bench
