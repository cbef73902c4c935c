// A small RGB canvas for the figures qkvlab writes (attention maps, training curves): filled
// rectangles, lines, text in stb_easy_font's built-in face, a perceptual colour map, and PNG
// output through stb_image_write (Debian's libstb).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::report {

using RGB = std::array<uint8_t, 3>;

class Canvas {
 public:
  Canvas(int width, int height, RGB background = {255, 255, 255});
  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, RGB c);                      // clipped
  void fill_rect(int x, int y, int w, int h, RGB c);  // clipped
  void line(int x0, int y0, int x1, int y1, RGB c, int thickness = 1);
  // Text with its top-left corner at (x, y); `scale` enlarges each font pixel. Returns the width.
  int text(int x, int y, const std::string& s, RGB c, int scale = 1);
  static int text_width(const std::string& s, int scale = 1);
  // Writes a PNG atomically; IOError naming the path on failure.
  void save_png(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;
};

// Viridis-like colour for t in [0, 1] (dark blue -> green -> yellow).
RGB colormap(double t);

}  // namespace qkv::report
