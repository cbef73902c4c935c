#include "train/data/image/image_resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/error.h"

namespace qkv::data {
namespace {

constexpr int kPrecisionBits = 22;  // PIL's PRECISION_BITS for 8-bit images: 32 - 8 - 2

// One output position's taps: the first source index and its fixed-point weights.
struct Taps {
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;  // out x ksize
  int64_t ksize = 0;
};

// PIL's precompute_coeffs + normalize_coeffs_8bpc for the triangle filter (support 1).
Taps bilinear_taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;
  Taps t;
  t.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(out * t.ksize, 0);
  std::vector<double> k(t.ksize);
  for (int64_t o = 0; o < out; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in);
    double total = 0.0;
    for (int64_t i = 0; i < hi - lo; ++i) {
      const double x = std::abs((static_cast<double>(i + lo) - center + 0.5) / filterscale);
      k[i] = x < 1.0 ? 1.0 - x : 0.0;
      total += k[i];
    }
    for (int64_t i = 0; i < hi - lo; ++i) {
      const double w = total != 0.0 ? k[i] / total : k[i];
      t.weights[o * t.ksize + i] = static_cast<int32_t>(0.5 + w * (1 << kPrecisionBits));  // w >= 0
    }
    t.first[o] = lo;
    t.count[o] = hi - lo;
  }
  return t;
}

uint8_t clip8(int64_t acc) {
  const int64_t v = acc >> kPrecisionBits;
  return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
}

// Resamples one axis: `outer` blocks, each `n` steps of `stride` elements along the axis.
void resample_axis(const uint8_t* src, int64_t outer, int64_t n, int64_t stride, const Taps& t, int64_t out,
                   uint8_t* dst) {
  for (int64_t b = 0; b < outer; ++b) {
    const uint8_t* s = src + b * n * stride;
    uint8_t* d = dst + b * out * stride;
    for (int64_t o = 0; o < out; ++o) {
      const int32_t* w = &t.weights[o * t.ksize];
      for (int64_t e = 0; e < stride; ++e) {
        int64_t acc = int64_t{1} << (kPrecisionBits - 1);
        for (int64_t i = 0; i < t.count[o]; ++i) acc += int64_t{s[(t.first[o] + i) * stride + e]} * w[i];
        d[o * stride + e] = clip8(acc);
      }
    }
  }
}

}  // namespace

void resize_bilinear(const uint8_t* src, int64_t h, int64_t w, int64_t channels, int64_t out_h, int64_t out_w,
                     uint8_t* dst) {
  check<ValueError>(h > 0 && w > 0 && channels > 0 && out_h > 0 && out_w > 0,
                    "resize_bilinear: sizes must be positive, got ", h, "x", w, "x", channels, " -> ", out_h, "x",
                    out_w);
  check<ValueError>(src != nullptr && dst != nullptr, "resize_bilinear: null image pointer");
  if (h == out_h && w == out_w) {
    std::memcpy(dst, src, static_cast<size_t>(h * w * channels));
    return;
  }
  // Horizontal pass first, as PIL does, then the vertical pass on its uint8 result.
  std::vector<uint8_t> tmp;
  const uint8_t* rows = src;
  if (w != out_w) {
    tmp.resize(static_cast<size_t>(h * out_w * channels));
    resample_axis(src, h, w, channels, bilinear_taps(w, out_w), out_w, tmp.data());
    rows = tmp.data();
  }
  if (h != out_h) resample_axis(rows, 1, h, out_w * channels, bilinear_taps(h, out_h), out_h, dst);
  else std::memcpy(dst, rows, static_cast<size_t>(h * out_w * channels));
}

}  // namespace qkv::data
