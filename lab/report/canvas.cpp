#include "lab/report/canvas.h"

#include <stb_easy_font.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cmath>

#include "tensor/atomic_file.h"
#include "tensor/error.h"

namespace qkv::report {

Canvas::Canvas(int width, int height, RGB bg) : width_(width), height_(height), pixels_(size_t(width * height) * 3) {
  check<ValueError>(width > 0 && height > 0, "canvas: invalid size ", width, "x", height);
  for (size_t i = 0; i < pixels_.size(); i += 3) std::copy(bg.begin(), bg.end(), pixels_.begin() + ptrdiff_t(i));
}

void Canvas::set(int x, int y, RGB c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  std::copy(c.begin(), c.end(), pixels_.begin() + ptrdiff_t((y * width_ + x) * 3));
}

void Canvas::fill_rect(int x, int y, int w, int h, RGB c) {
  for (int yy = std::max(y, 0); yy < std::min(y + h, height_); ++yy)
    for (int xx = std::max(x, 0); xx < std::min(x + w, width_); ++xx) set(xx, yy, c);
}

void Canvas::line(int x0, int y0, int x1, int y1, RGB c, int thickness) {
  const int steps = std::max(std::abs(x1 - x0), std::abs(y1 - y0));
  for (int i = 0; i <= steps; ++i) {
    const double t = steps ? double(i) / steps : 0.0;
    const int x = int(std::lround(x0 + t * (x1 - x0))), y = int(std::lround(y0 + t * (y1 - y0)));
    fill_rect(x - thickness / 2, y - thickness / 2, thickness, thickness, c);
  }
}

int Canvas::text_width(const std::string& s, int scale) {
  return stb_easy_font_width(const_cast<char*>(s.c_str())) * scale;
}

int Canvas::text(int x, int y, const std::string& s, RGB c, int scale) {
  // stb_easy_font emits axis-aligned quads (4 vertices of x, y, z, colour: 16 bytes each).
  std::vector<char> buffer(s.size() * 1024 + 1024);  // generous: a glyph can take many quads
  const int quads = stb_easy_font_print(0, 0, const_cast<char*>(s.c_str()), nullptr, buffer.data(), int(buffer.size()));
  const float* v = reinterpret_cast<const float*>(buffer.data());
  for (int q = 0; q < quads; ++q) {
    const float* quad = v + q * 16;  // 4 vertices x 4 floats
    const float qx0 = quad[0], qy0 = quad[1], qx1 = quad[8], qy1 = quad[9];
    fill_rect(x + int(qx0) * scale, y + int(qy0) * scale, int(qx1 - qx0) * scale, int(qy1 - qy0) * scale, c);
  }
  return text_width(s, scale);
}

void Canvas::save_png(const std::string& path) const {
  std::string png;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
  };
  const int ok = stbi_write_png_to_func(append, &png, width_, height_, 3, pixels_.data(), width_ * 3);
  check<IOError>(ok != 0, path, ": PNG encoding failed");
  write_file_atomically(path, [&](std::ostream& os) { os.write(png.data(), std::streamsize(png.size())); });
}

RGB colormap(double t) {
  // Viridis sampled at five points, linearly interpolated.
  static const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const int i = std::min(int(t), 3);
  const double f = t - i;
  RGB c;
  for (int k = 0; k < 3; ++k) c[size_t(k)] = uint8_t(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  return c;
}

}  // namespace qkv::report
