// Charts for odmoe-bench on a Canvas: line charts (recall per output-token
// index, throughput against the emulated load time), grouped bar charts with
// error bars (deployments, ablation cases) and a heat map (alignment
// periods). Axes with "nice" ticks, a title, axis labels and a legend.
// Non-finite values are skipped (a gap, no bar, a grey cell); empty data is
// an INVALID_ARGUMENT.
//
//   ChartText t{.title = "Recall", .x_label = "output token", .y_label = "recall"};
//   ODMOE_ASSIGN_OR_RETURN(Canvas c, LineChart(t, {{"token+kv", xs, ys}}, 0.0, 1.0));
//   ODMOE_RETURN_IF_ERROR(c.WritePng("recall.png"));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/png_canvas.h"

namespace odmoe::bench {

struct ChartText {
  std::string title, x_label, y_label;
};

struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// y range: [y_min, y_max] when given, else from the data (and 0).
absl::StatusOr<Canvas> LineChart(const ChartText& text, const std::vector<Series>& series,
                                 std::optional<double> y_min = std::nullopt,
                                 std::optional<double> y_max = std::nullopt, bool log_x = false);

struct BarGroup {
  std::string label;           // under the group
  std::vector<double> values;  // one per series
  std::vector<double> errors;  // empty, or one per series (drawn as +- error)
};

absl::StatusOr<Canvas> BarChart(const ChartText& text, const std::vector<std::string>& series,
                                const std::vector<BarGroup>& groups);

/// values[row][col]; NaN = not measured (grey).
absl::StatusOr<Canvas> HeatMap(const ChartText& text, const std::vector<std::string>& rows,
                               const std::vector<std::string>& cols,
                               const std::vector<std::vector<double>>& values);

/// Tick positions covering [lo, hi] with steps of 1, 2 or 5 x 10^k.
std::vector<double> NiceTicks(double lo, double hi, int target = 5);

}  // namespace odmoe::bench
