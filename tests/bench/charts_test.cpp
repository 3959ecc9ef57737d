// odmoe-bench's figures: the canvas draws where asked, the charts render
// their data (taller bars for larger values, distinct heat-map shades, grey
// for unmeasured cells), PNG files are written, and bad data is refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "bench/charts.h"
#include "bench/gnuplot_chart.h"
#include "bench/plots.h"

namespace odmoe::bench {
namespace {

bool Same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }

TEST_CASE("charts: canvas primitives and PNG", "[bench]") {
  Canvas c(40, 30);
  CHECK(Same(c.Pixel(5, 5), {255, 255, 255}));
  c.FillRect(2, 3, 6, 7, {10, 20, 30});
  CHECK(Same(c.Pixel(2, 3), {10, 20, 30}));
  CHECK(Same(c.Pixel(5, 6), {10, 20, 30}));
  CHECK(Same(c.Pixel(6, 7), {255, 255, 255}));
  c.Line(0, 20, 39, 20, {1, 2, 3}, 1);
  CHECK(Same(c.Pixel(17, 20), {1, 2, 3}));
  c.FillRect(-10, -10, 1000, 1, {9, 9, 9});  // clipped, no crash
  Canvas t(60, 20);
  t.Text(1, 1, "A1", {0, 0, 0}, 2);
  int ink = 0;
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 60; ++x) ink += Same(t.Pixel(x, y), {0, 0, 0});
  }
  CHECK(ink > 20);
  CHECK(Same(t.Pixel(40, 10), {255, 255, 255}));  // right of the two glyphs
  const std::string path = (std::filesystem::temp_directory_path() / "odmoe_canvas.png").string();
  REQUIRE(c.WritePng(path).ok());
  std::ifstream in(path, std::ios::binary);
  char sig[8];
  in.read(sig, 8);
  CHECK(std::string(sig + 1, 3) == "PNG");
  std::filesystem::remove(path);
  CHECK(!c.WritePng("/nonexistent-dir/x.png").ok());
}

TEST_CASE("charts: ticks, bars, lines, heat maps", "[bench]") {
  const std::vector<double> ticks = NiceTicks(0, 1);
  REQUIRE(ticks.size() >= 3);
  CHECK(ticks.front() == 0);
  CHECK(ticks.back() == Approx(1));
  CHECK(NiceTicks(1, 1).empty());
  CHECK(NiceTicks(0, NAN).empty());

  // Two single-bar groups: the larger value's bar reaches higher.
  auto bars = BarChart({"t", "x", "y"}, {"s"}, {{"a", {10}, {}}, {"b", {40}, {}}});
  REQUIRE(bars.ok());
  auto top = [&](int x) {
    for (int y = 0; y < bars->height(); ++y) {
      const Rgb p = bars->Pixel(x, y);
      if (p.r == 31 && p.g == 119 && p.b == 180) return y;
    }
    return -1;
  };
  const int w = bars->width();
  const int ya = top(90 + (w - 120) / 4), yb = top(90 + 3 * (w - 120) / 4);
  REQUIRE(ya > 0);
  REQUIRE(yb > 0);
  CHECK(yb < ya);
  CHECK(!BarChart({"t", "x", "y"}, {"s"}, {{"a", {1, 2}, {}}}).ok());
  CHECK(!BarChart({"t", "x", "y"}, {}, {}).ok());

  CHECK(LineChart({"t", "x", "y"}, {{"s", {1, 2, 3}, {0.5, NAN, 1}}}, 0.0, 1.0).ok());
  CHECK(LineChart({"t", "x", "y"}, {{"s", {10, 100}, {1, 2}}}, std::nullopt, std::nullopt, true).ok());
  CHECK(!LineChart({"t", "x", "y"}, {{"s", {1}, {}}}).ok());
  CHECK(!LineChart({"t", "x", "y"}, {{"s", {NAN}, {NAN}}}).ok());

  auto heat = HeatMap({"t", "x", "y"}, {"r1", "r2"}, {"c1", "c2"}, {{1, 2}, {3, NAN}});
  REQUIRE(heat.ok());
  // Cell centres (plot area 90..780 x 50..450, two by two).
  const Rgb lo = heat->Pixel(95, 55), hi = heat->Pixel(95, 255), nan = heat->Pixel(440, 255);
  CHECK(!Same(lo, hi));
  CHECK(Same(nan, {190, 190, 190}));
  CHECK(!HeatMap({"t", "x", "y"}, {"r"}, {"c"}, {{1, 2}}).ok());
}

TEST_CASE("charts: plots from a results.json", "[bench]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "odmoe_plots").string();
  std::filesystem::create_directories(dir);
  nlohmann::json results = {
      {"recall", {{"shadow-q8_0", {{"token+kv", {{"recall", 0.99}, {"per_token", {1.0, 0.9, nullptr}}}}}}}},
      {"ablation", {{"config", "16x8"}, {"cases", {{{"case", "1: a"}, {"decode_tps", 5.0}}}}}},
      {"periods", {{"periods", {1, 2}}, {"decode_tps", {{1.0, 2.0}, {3.0, nullptr}}}}},
      {"load-sweep", {{"rows", {{{"load_us", 10.0}, {"odmoe_tps", 5.0}, {"none_tps", 4.0},
                                 {"lru_tps", 3.0}, {"resident_tps", 6.0}}}}}},
      {"timing", {{"error", "skipped"}}},
  };
  std::vector<std::string> files;
  REQUIRE(WritePlots(results, dir, &files).ok());
  CHECK(files.size() == 4);
  for (const std::string& f : files) {
    INFO(f);
    CHECK(std::filesystem::file_size(dir + "/" + f) > 1000);
    std::ifstream png(dir + "/" + f, std::ios::binary);
    char sig[8] = {};
    png.read(sig, 8);
    CHECK(std::string(sig + 1, 3) == "PNG");
    if (GnuplotAvailable()) {  // drawn by gnuplot: its script beside the picture
      const std::string gp = dir + "/" + f.substr(0, f.size() - 4) + ".gp";
      std::ifstream in(gp);
      const std::string script((std::istreambuf_iterator<char>(in)), {});
      CHECK(script.find("set terminal pngcairo") != std::string::npos);
      CHECK(script.find("set key outside") != std::string::npos);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("charts: gnuplot scripts quote names, keep NaN gaps and report failures", "[bench]") {
  const std::string line = GnuplotLineScript({"Recall \"q8\"", "token", "recall"},
                                             {{"a\\b", {1, 2}, {0.5, std::nan("")}}}, 0.0,
                                             1.0, true, "/tmp/x.png");
  CHECK(line.find("title \"Recall \\\"q8\\\"\"") != std::string::npos);
  CHECK(line.find("\n2 NaN\n") != std::string::npos);
  CHECK(line.find("set logscale x") != std::string::npos);
  CHECK(line.find("set yrange [0:1]") != std::string::npos);
  const std::string bars =
      GnuplotBarScript({"t", "x", "y"}, {"odmoe", "none"}, {{"16x64", {10, 8}, {1, 0.5}}},
                       "/tmp/x.png");
  CHECK(bars.find("\"16x64\" 10 1 8 0.5") != std::string::npos);
  CHECK(bars.find("using 4:5 title \"none\"") != std::string::npos);
  const std::string heat = GnuplotHeatScript({"t", "x", "y"}, {"token 1"}, {"KV 1", "KV 2"},
                                             {{3.5, std::nan("")}}, "/tmp/x.png");
  CHECK(heat.find("3.5 NaN") != std::string::npos);
  CHECK(!GnuplotHeatMap({"t", "x", "y"}, {"r"}, {"c"}, {{1, 2}}, "/tmp/x.png").ok());
  CHECK(!GnuplotBarChart({"t", "x", "y"}, {}, {}, "/tmp/x.png").ok());
  if (GnuplotAvailable()) {
    const absl::Status s = GnuplotLineChart({"t", "x", "y"}, {{"a", {1}, {1}}}, std::nullopt,
                                            std::nullopt, false, "/nonexistent-dir/x.png");
    CHECK(s.code() == absl::StatusCode::kInternal);
  } else {
    WARN("gnuplot (gnuplot-nox) is not installed: the built-in rasterizer draws the plots");
  }
}

}  // namespace
}  // namespace odmoe::bench
