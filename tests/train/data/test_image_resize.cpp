// Bilinear resizing (train/data/image/image_resize.h) against the formula it documents, evaluated here
// in doubles: half-pixel centres, edge clamp, a horizontal pass rounded to uint8, then a vertical
// pass rounded to nearest. (The implementation was also checked bit for bit against PIL 9.4.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/error.h"
#include "train/data/image/image_resize.h"

using namespace qkv;
using qkv::data::resize_bilinear;

namespace {

std::vector<uint8_t> pattern(int64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

std::vector<uint8_t> resized(const std::vector<uint8_t>& src, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow) {
  std::vector<uint8_t> dst(oh * ow * c, 0);
  resize_bilinear(src.data(), h, w, c, oh, ow, dst.data());
  return dst;
}

// Upscaling taps of output index o: source s = (o + 0.5) * in / out - 0.5, clamped to the image.
void taps(int64_t o, int64_t in, int64_t out, int64_t& i0, int64_t& i1, double& f) {
  const double s = std::clamp((o + 0.5) * in / out - 0.5, 0.0, static_cast<double>(in - 1));
  i0 = static_cast<int64_t>(std::floor(s));
  i1 = std::min(i0 + 1, in - 1);
  f = s - static_cast<double>(i0);
}

}  // namespace

TEST_CASE("resize: a constant image stays constant when grown or shrunk") {
  for (const int value : {0, 93, 255}) {
    const std::vector<uint8_t> src(7 * 5 * 3, static_cast<uint8_t>(value));
    for (const auto& [oh, ow] : {std::pair<int64_t, int64_t>{224, 224}, {3, 2}, {11, 4}, {1, 1}}) {
      const std::vector<uint8_t> out = resized(src, 7, 5, 3, oh, ow);
      CHECK(std::count(out.begin(), out.end(), static_cast<uint8_t>(value)) == static_cast<int64_t>(out.size()));
    }
  }
}

TEST_CASE("resize: 2x2 to 4x4 is the half-pixel bilinear formula with edge clamp") {
  const std::vector<uint8_t> src = {0, 255, 10, 3, 200, 40, 77, 128};  // 2x2, 2 channels
  const std::vector<uint8_t> out = resized(src, 2, 2, 2, 4, 4);
  for (int64_t c = 0; c < 2; ++c) {
    std::vector<double> rows(2 * 4);  // after the horizontal pass, rounded
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t x = 0; x < 4; ++x) {
        int64_t i0, i1;
        double f;
        taps(x, 2, 4, i0, i1, f);
        const double v = (1 - f) * src[(y * 2 + i0) * 2 + c] + f * src[(y * 2 + i1) * 2 + c];
        rows[y * 4 + x] = std::floor(v + 0.5);
      }
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 4; ++x) {
        int64_t j0, j1;
        double g;
        taps(y, 2, 4, j0, j1, g);
        const double want = std::floor((1 - g) * rows[j0 * 4 + x] + g * rows[j1 * 4 + x] + 0.5);
        CHECK(out[(y * 4 + x) * 2 + c] == static_cast<int>(want));
      }
  }
  // The corners are the source's corners (clamped), the inner pixels mixes.
  CHECK(out[0] == src[0]);
  CHECK(out[(3 * 4 + 3) * 2 + 1] == src[3 * 2 + 1]);
}

TEST_CASE("resize: equal sizes copy the image") {
  const std::vector<uint8_t> src = pattern(9 * 13 * 3, 5);
  CHECK(resized(src, 9, 13, 3, 9, 13) == src);
}

TEST_CASE("resize: channels are resized independently") {
  const int64_t h = 6, w = 5, c = 3;
  const std::vector<uint8_t> src = pattern(h * w * c, 11);
  for (const auto& [oh, ow] : {std::pair<int64_t, int64_t>{17, 9}, {2, 3}}) {
    const std::vector<uint8_t> all = resized(src, h, w, c, oh, ow);
    for (int64_t ch = 0; ch < c; ++ch) {
      std::vector<uint8_t> plane(h * w);
      for (int64_t i = 0; i < h * w; ++i) plane[i] = src[i * c + ch];
      const std::vector<uint8_t> one = resized(plane, h, w, 1, oh, ow);
      for (int64_t i = 0; i < oh * ow; ++i) REQUIRE(all[i * c + ch] == one[i]);
    }
  }
}

TEST_CASE("resize: shrinking antialiases: every source column under an output pixel counts") {
  // Columns 255,0,0,0 repeated: plain bilinear at 4x shrink samples between columns 1 and 2 (0).
  std::vector<uint8_t> src(2 * 16);
  for (int64_t y = 0; y < 2; ++y)
    for (int64_t x = 0; x < 16; ++x) src[y * 16 + x] = x % 4 == 0 ? 255 : 0;
  const std::vector<uint8_t> out = resized(src, 2, 16, 1, 2, 4);
  for (int64_t x = 1; x < 4; ++x) {
    CHECK(out[x] > 0);
    CHECK(out[x] < 128);
  }
}

TEST_CASE("resize: a non-positive size is refused") {
  const std::vector<uint8_t> src(4);
  std::vector<uint8_t> dst(4);
  CHECK_THROWS_AS(resize_bilinear(src.data(), 2, 2, 1, 0, 2, dst.data()), ValueError);
  CHECK_THROWS_AS(resize_bilinear(src.data(), 2, -1, 1, 2, 2, dst.data()), ValueError);
}
