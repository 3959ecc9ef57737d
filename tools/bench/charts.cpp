#include "bench/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace odmoe::bench {
namespace {

constexpr int kW = 900, kH = 540;
constexpr int kLeft = 90, kRight = 30, kTop = 50, kBottom = 90;
constexpr Rgb kInk{30, 30, 30}, kGrid{225, 225, 225}, kGrey{190, 190, 190};

Rgb Color(size_t i) {
  static const Rgb palette[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},
                                {214, 39, 40},  {148, 103, 189}, {140, 86, 75},
                                {227, 119, 194}, {127, 127, 127}, {188, 189, 34}};
  return palette[i % (sizeof(palette) / sizeof(palette[0]))];
}

std::string Label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) {
    std::snprintf(buf, sizeof(buf), "%.0e", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%g", std::round(v * 1e4) / 1e4);
  }
  return buf;
}

// The plot area and its value -> pixel maps.
struct Frame {
  int x0 = kLeft, x1 = kW - kRight, y0 = kTop, y1 = kH - kBottom;  // y1 = bottom
  double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  bool log_x = false;
  int X(double v) const {
    const double a = log_x ? std::log10(v) : v, lo = log_x ? std::log10(xlo) : xlo,
                 hi = log_x ? std::log10(xhi) : xhi;
    return x0 + static_cast<int>(std::lround((a - lo) / (hi - lo) * (x1 - x0)));
  }
  int Y(double v) const {
    return y1 - static_cast<int>(std::lround((v - ylo) / (yhi - ylo) * (y1 - y0)));
  }
};

void Titles(Canvas& c, const ChartText& t) {
  c.Text((kW - Canvas::TextWidth(t.title, 2)) / 2, 14, t.title, kInk, 2);
  c.Text((kW - Canvas::TextWidth(t.x_label, 1)) / 2, kH - 28, t.x_label, kInk, 1);
  c.TextUp(14, (kH + Canvas::TextWidth(t.y_label, 1)) / 2, t.y_label, kInk, 1);
}

void YAxis(Canvas& c, const Frame& f) {
  for (double v : NiceTicks(f.ylo, f.yhi)) {
    const int y = f.Y(v);
    c.Line(f.x0, y, f.x1, y, kGrid);
    const std::string l = Label(v);
    c.Text(f.x0 - 8 - Canvas::TextWidth(l), y - 3, l, kInk);
  }
  c.Line(f.x0, f.y0, f.x0, f.y1, kInk);
  c.Line(f.x0, f.y1, f.x1, f.y1, kInk);
}

void Legend(Canvas& c, const std::vector<std::string>& names) {
  int y = kTop + 6;
  size_t longest = 0;
  for (const std::string& n : names) longest = std::max(longest, n.size());
  const int x = kW - kRight - 24 - Canvas::TextWidth(std::string(longest, 'x'));
  for (size_t i = 0; i < names.size(); ++i, y += 14) {
    c.FillRect(x - 2, y - 3, kW - kRight - 2, y + 11, {255, 255, 255});
    c.FillRect(x, y, x + 14, y + 7, Color(i));
    c.Text(x + 20, y, names[i], kInk);
  }
}

bool Finite(double v) { return std::isfinite(v); }

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!Finite(lo) || !Finite(hi) || hi <= lo || target < 1) return ticks;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

absl::StatusOr<Canvas> LineChart(const ChartText& text, const std::vector<Series>& series,
                                 std::optional<double> y_min, std::optional<double> y_max,
                                 bool log_x) {
  Frame f;
  f.log_x = log_x;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : series) {
    if (s.x.size() != s.y.size()) {
      return absl::InvalidArgumentError("line chart: a series has different x and y counts");
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!Finite(s.x[i]) || !Finite(s.y[i]) || (log_x && s.x[i] <= 0)) continue;
      xlo = std::min(xlo, s.x[i]);
      xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  }
  if (!Finite(xlo)) return absl::InvalidArgumentError("line chart: no finite points");
  if (xhi == xlo) xhi = log_x ? xlo * 10 : xlo + 1;
  ylo = y_min.value_or(std::min(0.0, ylo));
  yhi = y_max.value_or(yhi * 1.08);
  if (!(yhi > ylo)) yhi = ylo + 1;
  f.xlo = xlo;
  f.xhi = xhi;
  f.ylo = ylo;
  f.yhi = yhi;
  Canvas c(kW, kH);
  Titles(c, text);
  YAxis(c, f);
  std::vector<double> xticks;
  if (log_x) {
    for (double v = std::pow(10.0, std::floor(std::log10(xlo))); v <= xhi * 1.0001; v *= 10) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m * v >= xlo * 0.9999 && m * v <= xhi * 1.0001) xticks.push_back(m * v);
      }
    }
  } else {
    xticks = NiceTicks(xlo, xhi, 8);
  }
  for (double v : xticks) {
    const std::string l = Label(v);
    c.Line(f.X(v), f.y1, f.X(v), f.y1 + 4, kInk);
    c.Text(f.X(v) - Canvas::TextWidth(l) / 2, f.y1 + 9, l, kInk);
  }
  std::vector<std::string> names;
  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    names.push_back(s.name);
    bool have = false;
    int px = 0, py = 0;
    const bool markers = s.x.size() <= 24;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!Finite(s.x[i]) || !Finite(s.y[i]) || (log_x && s.x[i] <= 0)) {
        have = false;  // a gap
        continue;
      }
      const int x = f.X(s.x[i]), y = f.Y(std::clamp(s.y[i], ylo, yhi));
      if (have) c.Line(px, py, x, y, Color(si), 2);
      if (markers) c.Marker(x, y, Color(si), 3);
      px = x;
      py = y;
      have = true;
    }
  }
  Legend(c, names);
  return c;
}

absl::StatusOr<Canvas> BarChart(const ChartText& text, const std::vector<std::string>& series,
                                const std::vector<BarGroup>& groups) {
  if (series.empty() || groups.empty()) {
    return absl::InvalidArgumentError("bar chart: no series or no groups");
  }
  double yhi = 0;
  for (const BarGroup& g : groups) {
    if (g.values.size() != series.size() ||
        (!g.errors.empty() && g.errors.size() != series.size())) {
      return absl::InvalidArgumentError("bar chart: a group's values do not match the series");
    }
    for (size_t i = 0; i < g.values.size(); ++i) {
      const double e = g.errors.empty() || !Finite(g.errors[i]) ? 0 : g.errors[i];
      if (Finite(g.values[i])) yhi = std::max(yhi, g.values[i] + e);
    }
  }
  Frame f;
  f.ylo = 0;
  f.yhi = yhi > 0 ? yhi * 1.15 : 1;
  Canvas c(kW, kH);
  Titles(c, text);
  YAxis(c, f);
  const double slot = static_cast<double>(f.x1 - f.x0) / groups.size();
  const double bar = slot * 0.8 / series.size();
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const BarGroup& g = groups[gi];
    const double gx = f.x0 + slot * gi + slot * 0.1;
    for (size_t si = 0; si < series.size(); ++si) {
      const double v = g.values[si];
      if (!Finite(v)) continue;
      const int x0 = static_cast<int>(gx + bar * si), x1 = static_cast<int>(gx + bar * (si + 1)) - 2;
      c.FillRect(x0, f.Y(std::max(0.0, v)), x1, f.y1, Color(si));
      const int mid = (x0 + x1) / 2;
      if (!g.errors.empty() && Finite(g.errors[si]) && g.errors[si] > 0) {
        const int ya = f.Y(v + g.errors[si]), yb = f.Y(std::max(0.0, v - g.errors[si]));
        c.Line(mid, ya, mid, yb, kInk);
        c.Line(mid - 4, ya, mid + 4, ya, kInk);
        c.Line(mid - 4, yb, mid + 4, yb, kInk);
      }
      char buf[32];
      std::snprintf(buf, sizeof(buf), v >= 100 ? "%.0f" : "%.3g", v);
      const int ty = f.Y(v + (g.errors.empty() || !Finite(g.errors[si]) ? 0 : g.errors[si])) - 10;
      c.Text(mid - Canvas::TextWidth(buf) / 2, ty, buf, kInk);
    }
    // The group's label, cut to its slot.
    std::string label = g.label;
    const size_t fit = static_cast<size_t>(std::max(1.0, slot / 6));
    if (label.size() > fit) label = label.substr(0, fit);
    c.Text(static_cast<int>(f.x0 + slot * gi + slot / 2) - Canvas::TextWidth(label) / 2,
           f.y1 + 9, label, kInk);
  }
  if (series.size() > 1) Legend(c, series);
  return c;
}

absl::StatusOr<Canvas> HeatMap(const ChartText& text, const std::vector<std::string>& rows,
                               const std::vector<std::string>& cols,
                               const std::vector<std::vector<double>>& values) {
  if (rows.empty() || cols.empty() || values.size() != rows.size()) {
    return absl::InvalidArgumentError("heat map: rows, columns and values do not match");
  }
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& r : values) {
    if (r.size() != cols.size()) {
      return absl::InvalidArgumentError("heat map: a row has the wrong number of values");
    }
    for (double v : r) {
      if (!Finite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  Canvas c(kW, kH);
  Titles(c, text);
  Frame f;
  f.x1 -= 90;  // room for the colour bar
  const double cw = static_cast<double>(f.x1 - f.x0) / cols.size();
  const double ch = static_cast<double>(f.y1 - f.y0) / rows.size();
  // Dark blue -> teal -> yellow, interpolated.
  auto shade = [&](double v) -> Rgb {
    const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    const Rgb a{40, 40, 120}, b{40, 160, 140}, d{250, 225, 60};
    const Rgb& p = t < 0.5 ? a : b;
    const Rgb& q = t < 0.5 ? b : d;
    const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
    auto mix = [u](uint8_t x, uint8_t y) {
      return static_cast<uint8_t>(std::lround(x + (y - x) * u));
    };
    return {mix(p.r, q.r), mix(p.g, q.g), mix(p.b, q.b)};
  };
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t k = 0; k < cols.size(); ++k) {
      const double v = values[r][k];
      const int x0 = static_cast<int>(f.x0 + cw * k), x1 = static_cast<int>(f.x0 + cw * (k + 1));
      const int y0 = static_cast<int>(f.y0 + ch * r), y1 = static_cast<int>(f.y0 + ch * (r + 1));
      const Rgb fill = Finite(v) ? shade(v) : kGrey;
      c.FillRect(x0, y0, x1 - 1, y1 - 1, fill);
      char buf[32];
      std::snprintf(buf, sizeof(buf), Finite(v) ? (v >= 100 ? "%.0f" : "%.3g") : "n/a", v);
      const bool dark = fill.r + fill.g + fill.b < 380;
      c.Text((x0 + x1) / 2 - Canvas::TextWidth(buf) / 2, (y0 + y1) / 2 - 3, buf,
             dark ? Rgb{255, 255, 255} : kInk);
    }
    c.Text(f.x0 - 8 - Canvas::TextWidth(rows[r]), static_cast<int>(f.y0 + ch * (r + 0.5)) - 3,
           rows[r], kInk);
  }
  for (size_t k = 0; k < cols.size(); ++k) {
    c.Text(static_cast<int>(f.x0 + cw * (k + 0.5)) - Canvas::TextWidth(cols[k]) / 2, f.y1 + 9,
           cols[k], kInk);
  }
  // Colour bar.
  const int bx = f.x1 + 30;
  for (int y = f.y0; y < f.y1; ++y) {
    const double v = hi - (hi - lo) * (y - f.y0) / std::max(1, f.y1 - f.y0);
    c.FillRect(bx, y, bx + 16, y + 1, Finite(v) ? shade(v) : kGrey);
  }
  if (Finite(lo)) {
    c.Text(bx + 20, f.y0, Label(hi), kInk);
    c.Text(bx + 20, f.y1 - 7, Label(lo), kInk);
  }
  return c;
}

}  // namespace odmoe::bench
