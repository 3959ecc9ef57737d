// A small RGB raster for odmoe-bench's figures: filled rectangles, thick
// lines, markers, and text in a built-in 5x7 bitmap font (ASCII; lower case
// drawn as small capitals), written as PNG with libpng.
//
//   Canvas c(640, 400);                       // white
//   c.FillRect(10, 10, 50, 30, {200, 0, 0});
//   c.Line(0, 0, 639, 399, {0, 0, 0}, 2);
//   c.Text(20, 20, "recall", {0, 0, 0}, 2);  // scale 2: 10x14 pixel glyphs
//   ODMOE_RETURN_IF_ERROR(c.WritePng("plot.png"));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace odmoe::bench {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background = {255, 255, 255});
  int width() const { return width_; }
  int height() const { return height_; }
  Rgb Pixel(int x, int y) const;  // black outside

  void Set(int x, int y, Rgb c);  // ignored outside
  /// [x0, x1) x [y0, y1), clipped.
  void FillRect(int x0, int y0, int x1, int y1, Rgb c);
  void Line(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);
  void Marker(int x, int y, Rgb c, int radius = 3);
  /// Top-left at (x, y); '\n' not interpreted. Unknown characters draw a box.
  void Text(int x, int y, const std::string& text, Rgb c, int scale = 1);
  /// Rotated 90 degrees counter-clockwise, reading upwards from (x, y).
  void TextUp(int x, int y, const std::string& text, Rgb c, int scale = 1);
  static int TextWidth(const std::string& text, int scale = 1) {
    return static_cast<int>(text.size()) * 6 * scale;
  }
  static int TextHeight(int scale = 1) { return 7 * scale; }

  absl::Status WritePng(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

}  // namespace odmoe::bench
