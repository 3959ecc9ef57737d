#include "bench/gnuplot_chart.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace odmoe::bench {
namespace {

// A gnuplot double-quoted string literal.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string Value(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "NaN"; }

std::string Preamble(const ChartText& text, const std::string& png_path) {
  std::ostringstream gp;
  gp << "# Drawn by odmoe-bench; run `gnuplot " << absl::StripSuffix(png_path, ".png")
     << ".gp` to redraw.\n"
     << "set terminal pngcairo size 1100,620 noenhanced font \"DejaVu Sans,12\"\n"
     << "set output " << Quote(png_path) << "\n"
     << "set title " << Quote(text.title) << " font \",14\"\n"
     << "set xlabel " << Quote(text.x_label) << "\n"
     << "set ylabel " << Quote(text.y_label) << "\n"
     << "set key outside right top vertical box opaque\n"  // never over the data
     << "set grid ytics lc rgb \"#dddddd\"\n"
     << "set border 3\nset tics nomirror\n";
  return gp.str();
}

absl::Status Run(const std::string& script, const std::string& png_path) {
  const std::string gp_path = absl::StrCat(absl::StripSuffix(png_path, ".png"), ".gp");
  {
    std::ofstream out(gp_path);
    out << script;
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", gp_path));
  }
  const std::string cmd = absl::StrCat("gnuplot ", Quote(gp_path), " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError("cannot run gnuplot");
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
  const int status = pclose(p);
  if (status != 0) {
    return absl::InternalError(absl::StrCat("gnuplot ", gp_path, " failed: ", output));
  }
  return absl::OkStatus();
}

}  // namespace

bool GnuplotAvailable() {
  static const bool available = [] {
    FILE* p = popen("gnuplot -e 'set terminal' 2>&1", "r");
    if (p == nullptr) return false;
    std::string output;
    char buf[512];
    while (fgets(buf, sizeof(buf), p) != nullptr) output += buf;
    return pclose(p) == 0 && output.find("pngcairo") != std::string::npos;
  }();
  return available;
}

std::string GnuplotLineScript(const ChartText& text, const std::vector<Series>& series,
                              std::optional<double> y_min, std::optional<double> y_max,
                              bool log_x, const std::string& png_path) {
  std::ostringstream gp;
  gp << Preamble(text, png_path);
  if (log_x) gp << "set logscale x 10\n";
  gp << "set yrange [" << (y_min ? Value(*y_min) : "*") << ":" << (y_max ? Value(*y_max) : "*")
     << "]\n";
  std::vector<std::string> plots;
  for (size_t i = 0; i < series.size(); ++i) {
    gp << "$s" << i << " << EOD\n";
    for (size_t j = 0; j < series[i].x.size() && j < series[i].y.size(); ++j) {
      gp << Value(series[i].x[j]) << " " << Value(series[i].y[j]) << "\n";
    }
    gp << "EOD\n";
    plots.push_back(absl::StrCat("$s", i, " using 1:2 with linespoints lw 2 pt 7 ps 0.7 title ",
                                 Quote(series[i].name)));
  }
  gp << "plot ";
  for (size_t i = 0; i < plots.size(); ++i) gp << (i ? ", \\\n     " : "") << plots[i];
  gp << "\n";
  return gp.str();
}

std::string GnuplotBarScript(const ChartText& text, const std::vector<std::string>& series,
                             const std::vector<BarGroup>& groups, const std::string& png_path) {
  std::ostringstream gp;
  gp << Preamble(text, png_path)
     << "set style data histograms\n"
     << "set style histogram errorbars gap 1.5 lw 1.5\n"
     << "set style fill solid 0.85 border -1\n"
     << "set yrange [0:*]\nset xtics scale 0\n";
  gp << "$d << EOD\n";
  for (const BarGroup& g : groups) {
    gp << Quote(g.label);
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = s < g.values.size() ? g.values[s] : std::nan("");
      const double e = s < g.errors.size() && std::isfinite(g.errors[s]) ? g.errors[s] : 0.0;
      gp << " " << Value(v) << " " << Value(e);
    }
    gp << "\n";
  }
  gp << "EOD\nplot ";
  for (size_t s = 0; s < series.size(); ++s) {
    gp << (s ? ", \\\n     '' " : "$d ") << "using " << 2 + 2 * s << ":" << 3 + 2 * s
       << (s == 0 ? ":xtic(1)" : "") << " title " << Quote(series[s]);
  }
  gp << "\n";
  return gp.str();
}

std::string GnuplotHeatScript(const ChartText& text, const std::vector<std::string>& rows,
                              const std::vector<std::string>& cols,
                              const std::vector<std::vector<double>>& values,
                              const std::string& png_path) {
  std::ostringstream gp;
  gp << Preamble(text, png_path) << "unset key\nunset grid\n";
  gp << "set xrange [-0.5:" << cols.size() - 0.5 << "]\n"
     << "set yrange [" << rows.size() - 0.5 << ":-0.5]\n"  // first row on top, as in tables
     << "set palette defined (0 \"#f7fbff\", 1 \"#6baed6\", 2 \"#2171b5\")\n"
     << "set xtics (";
  for (size_t c = 0; c < cols.size(); ++c) gp << (c ? ", " : "") << Quote(cols[c]) << " " << c;
  gp << ")\nset ytics (";
  for (size_t r = 0; r < rows.size(); ++r) gp << (r ? ", " : "") << Quote(rows[r]) << " " << r;
  gp << ")\n$d << EOD\n";
  for (const std::vector<double>& row : values) {
    for (size_t c = 0; c < cols.size(); ++c) {
      gp << (c ? " " : "") << Value(c < row.size() ? row[c] : std::nan(""));
    }
    gp << "\n";
  }
  gp << "EOD\n"
     << "plot $d matrix with image, \\\n"
     << "     $d matrix using 1:2:(($3 == $3) ? sprintf(\"%.1f\", $3) : \"-\") with labels\n";
  return gp.str();
}

absl::Status GnuplotLineChart(const ChartText& text, const std::vector<Series>& series,
                              std::optional<double> y_min, std::optional<double> y_max,
                              bool log_x, const std::string& png_path) {
  if (series.empty()) return absl::InvalidArgumentError("a line chart needs a series");
  return Run(GnuplotLineScript(text, series, y_min, y_max, log_x, png_path), png_path);
}

absl::Status GnuplotBarChart(const ChartText& text, const std::vector<std::string>& series,
                             const std::vector<BarGroup>& groups, const std::string& png_path) {
  if (series.empty() || groups.empty()) {
    return absl::InvalidArgumentError("a bar chart needs series and groups");
  }
  return Run(GnuplotBarScript(text, series, groups, png_path), png_path);
}

absl::Status GnuplotHeatMap(const ChartText& text, const std::vector<std::string>& rows,
                            const std::vector<std::string>& cols,
                            const std::vector<std::vector<double>>& values,
                            const std::string& png_path) {
  if (rows.empty() || cols.empty() || values.size() != rows.size()) {
    return absl::InvalidArgumentError("a heat map needs one row of values per row label");
  }
  for (const std::vector<double>& r : values) {
    if (r.size() != cols.size()) {
      return absl::InvalidArgumentError("a heat map needs one value per column in every row");
    }
  }
  return Run(GnuplotHeatScript(text, rows, cols, values, png_path), png_path);
}

}  // namespace odmoe::bench
