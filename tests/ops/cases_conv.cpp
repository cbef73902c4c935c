// Test cases for the image ops: conv2d (and its backward row), inference batch_norm,
// max_pool2d and adaptive_avg_pool2d. References are naive loops over every output element and
// every kernel tap, written from the definitions rather than from the kernels' lowering.
#include <cmath>
#include <limits>

#include "tests/ops/references.h"

namespace qkv::test {
namespace {

// Input coordinate under output o and kernel tap t along one axis, or -1 outside [0, n).
int64_t tap(int64_t o, int64_t t, int64_t stride, int64_t pad, int64_t n) {
  const int64_t i = o * stride - pad + t;
  return i >= 0 && i < n ? i : -1;
}

int64_t conv_out(int64_t n, int64_t k, int64_t stride, int64_t pad) { return (n + 2 * pad - k) / stride + 1; }

// Calls f(out, c, i, j, ih, iw) for every output index out = (n, o, oh, ow), input channel c
// and kernel tap (i, j) that lands inside the input, at (ih, iw) (x [N, C, H, W], w [O, C, kh, kw]).
template <class F> void for_each_conv_term(const Shape& x, const Shape& w, const Conv2dAttrs& a, F f) {
  const int64_t Ho = conv_out(x[2], w[2], a.stride[0], a.padding[0]);
  const int64_t Wo = conv_out(x[3], w[3], a.stride[1], a.padding[1]);
  for_each_index({x[0], w[0], Ho, Wo}, [&](const std::vector<int64_t>& out) {
    for (int64_t c = 0; c < x[1]; ++c)
      for (int64_t i = 0; i < w[2]; ++i)
        for (int64_t j = 0; j < w[3]; ++j) {
          const int64_t ih = tap(out[2], i, a.stride[0], a.padding[0], x[2]);
          const int64_t iw = tap(out[3], j, a.stride[1], a.padding[1], x[3]);
          if (ih >= 0 && iw >= 0) f(out, c, i, j, ih, iw);
        }
  });
}

Shape conv_shape(const Shape& x, const Shape& w, const Conv2dAttrs& a) {
  return {x[0], w[0], conv_out(x[2], w[2], a.stride[0], a.padding[0]), conv_out(x[3], w[3], a.stride[1], a.padding[1])};
}

Conv2dAttrs conv(int64_t sh, int64_t sw, int64_t ph, int64_t pw) { return {{sh, sw}, {ph, pw}}; }

// The large samples sum a few hundred float32 products per output (partial sums near 15): the
// CPU's float32 results differ from the float64 reference by up to about 1.2e-5, and CUDA's
// GEMM rounds in another order, so the default 2e-5 would leave too little room.
constexpr double kConvF32Tolerance = 1e-4;

// Samples with inputs (grad, x, weight, bias) sized for the CUDA kernels' multi-chunk and
// multi-block paths; conv2d drops the grad, conv2d_backward the bias. Central differences over
// them would be slow on the CPU, so only analytic gradients are compared (CUDA against CPU).
std::vector<Sample> conv_samples_large() {
  std::vector<Sample> s = {{"35 images: two column chunks",
                            {real({35, 4, 3, 5}), real({35, 3, 5, 4}), real({4, 3, 3, 2}), real({4})},
                            conv(2, 1, 1, 1)},
                           {"65 images: three chunks, the last of one image",
                            {real({65, 3, 4, 5}), real({65, 2, 4, 5}), real({3, 2, 3, 3}), absent()},
                            conv(1, 1, 1, 1)},
                           {"40 channels, stride 2, 3x2 kernel",
                            {real({3, 36, 6, 4}), real({3, 40, 11, 8}), real({36, 40, 3, 2}), real({36})},
                            conv(2, 2, 1, 0)},
                           {"1x1, 48 channels",
                            {real({4, 40, 6, 5}), real({4, 48, 6, 5}), real({40, 48, 1, 1}), real({40})},
                            conv(1, 1, 0, 0)},
                           {"36 images, 34 channels, 3x3 pad 1",
                            {real({36, 33, 4, 3}), real({36, 34, 4, 3}), real({33, 34, 3, 3}), real({33})},
                            conv(1, 1, 1, 1)}};
  for (Sample& x : s) x.numeric_grad = false;
  return s;
}

}  // namespace

OpCase case_conv2d() {
  OpCase c;
  c.samples = {{"3x3 pad 1", {real({2, 3, 6, 5}), real({4, 3, 3, 3}), real({4})}, conv(1, 1, 1, 1)},
               {"stride 2, no bias", {real({2, 3, 6, 5}), real({2, 3, 3, 2}), absent()}, conv(2, 2, 0, 1)},
               {"1x1 pointwise", {real({2, 3, 4, 5}), real({4, 3, 1, 1}), real({4})}, conv(1, 1, 0, 0)},
               {"1x1 stride 2", {real({2, 3, 5, 5}), real({2, 3, 1, 1}), absent()}, conv(2, 2, 0, 0)},
               {"5x5 stride (2, 3) pad (2, 1)", {real({2, 2, 8, 7}), real({3, 2, 5, 5}), real({3})}, conv(2, 3, 2, 1)},
               {"images grouped per GEMM", {real({5, 2, 4, 3}), real({3, 2, 3, 3}), real({3})}, conv(2, 2, 1, 1)},
               {"1x1 input: taps on padding only",
                {real({3, 4, 1, 1}), real({2, 4, 3, 3}), real({2})},
                conv(1, 1, 1, 1)},
               {"1-row input", {real({2, 2, 1, 3}), real({3, 2, 3, 3}), absent()}, conv(1, 1, 1, 1)},
               {"every tap on padding", {real({2, 2, 1, 1}), real({3, 2, 1, 1}), real({3})}, conv(3, 3, 2, 2)}};
  // Larger samples for the CUDA kernel's paths (kernels/cuda/conv.cu takes at most 32 images per
  // column chunk): several chunks, a last chunk of one image, more than 32 channels.
  for (Sample s : conv_samples_large()) {
    s.inputs.erase(s.inputs.begin());  // the grad
    c.samples.push_back(s);
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<Conv2dAttrs>(attrs);
    const Ref &x = in[0], &w = in[1], &b = in[2];
    Ref y(conv_shape(x.shape, w.shape, a));
    if (!b.v.empty()) for_each_index(y.shape, [&](const std::vector<int64_t>& o) { y.at(o) = b.v[size_t(o[1])]; });
    for_each_conv_term(x.shape, w.shape, a,
                       [&](const std::vector<int64_t>& o, int64_t ch, int64_t i, int64_t j, int64_t ih, int64_t iw) {
                         y.at(o) += x.at({o[0], ch, ih, iw}) * w.at({o[1], ch, i, j});
                       });
    return std::vector<Ref>{y};
  };
  c.f32_tolerance = kConvF32Tolerance;
  return c;
}

// Inputs (grad, x, weight): each term y[o] += x w of the forward sends g[o] w to dx, g[o] x to
// dweight, and g[o] to dbias.
OpCase case_conv2d_backward() {
  OpCase c;
  c.samples = {{"3x3 pad 1", {real({2, 4, 6, 5}), real({2, 3, 6, 5}), real({4, 3, 3, 3})}, conv(1, 1, 1, 1)},
               {"stride 2", {real({2, 2, 2, 3}), real({2, 3, 6, 5}), real({2, 3, 3, 2})}, conv(2, 2, 0, 1)},
               {"1x1 pointwise", {real({2, 4, 4, 5}), real({2, 3, 4, 5}), real({4, 3, 1, 1})}, conv(1, 1, 0, 0)},
               {"5x5 stride (2, 3) pad (2, 1)",
                {real({2, 3, 4, 2}), real({2, 2, 8, 7}), real({3, 2, 5, 5})},
                conv(2, 3, 2, 1)}};
  for (Sample s : conv_samples_large()) {
    s.inputs.pop_back();  // the bias
    c.samples.push_back(s);
  }
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<Conv2dAttrs>(attrs);
    const Ref &g = in[0], &x = in[1], &w = in[2];
    Ref dx(x.shape), dw(w.shape), db(Shape{w.shape[0]});
    for_each_index(g.shape, [&](const std::vector<int64_t>& o) { db.v[size_t(o[1])] += g.at(o); });
    for_each_conv_term(x.shape, w.shape, a,
                       [&](const std::vector<int64_t>& o, int64_t ch, int64_t i, int64_t j, int64_t ih, int64_t iw) {
                         dx.at({o[0], ch, ih, iw}) += g.at(o) * w.at({o[1], ch, i, j});
                         dw.at({o[1], ch, i, j}) += g.at(o) * x.at({o[0], ch, ih, iw});
                       });
    return std::vector<Ref>{dx, dw, db};
  };
  c.gradcheck = false;
  c.f32_tolerance = kConvF32Tolerance;
  return c;
}

// Inputs (x, running_mean, running_var, weight?, bias?); the statistics are not differentiated.
OpCase case_batch_norm() {
  OpCase c;
  auto stats = [](int64_t ch) { return std::vector<InputSpec>{constant(real({ch})), constant(positive({ch}))}; };
  auto sample = [&](const char* label, Shape x, int64_t ch, InputSpec w, InputSpec b, double eps) {
    std::vector<InputSpec> in{real(std::move(x))};
    for (InputSpec& s : stats(ch)) in.push_back(s);
    in.push_back(std::move(w));
    in.push_back(std::move(b));
    return Sample{label, in, BatchNormAttrs{eps}};
  };
  c.samples = {sample("4-d affine", {2, 3, 4, 5}, 3, real({3}), real({3}), 1e-5),
               sample("2-d no affine", {4, 3}, 3, absent(), absent(), 1e-3),
               sample("3-d weight only", {2, 4, 3}, 4, real({4}), absent(), 1e-5),
               sample("bias only", {3, 2, 2, 2}, 2, absent(), real({2}), 0.1),
               sample("40 channels, many blocks", {3, 40, 7, 5}, 40, real({40}), real({40}), 1e-5),
               sample("2-d 70 x 50", {70, 50}, 50, real({50}), absent(), 1e-5)};
  c.samples[4].numeric_grad = c.samples[5].numeric_grad = false;
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const double eps = std::get<BatchNormAttrs>(attrs).eps;
    const Ref &x = in[0], &mean = in[1], &var = in[2], &w = in[3], &b = in[4];
    Ref y(x.shape);
    for_each_index(x.shape, [&](const std::vector<int64_t>& i) {
      const size_t ch = size_t(i[1]);
      const double scale = w.v.empty() ? 1 : w.v[ch], shift = b.v.empty() ? 0 : b.v[ch];
      y.at(i) = (x.at(i) - mean.v[ch]) / std::sqrt(var.v[ch] + eps) * scale + shift;
    });
    return std::vector<Ref>{y};
  };
  return c;
}

OpCase case_max_pool2d() {
  auto pool = [](std::array<int64_t, 2> k, std::array<int64_t, 2> s, std::array<int64_t, 2> p) {
    return Pool2dAttrs{k, s, p};
  };
  OpCase c;
  c.samples = {{"3x3 stride 2 pad 1", {real({2, 3, 6, 5})}, pool({3, 3}, {2, 2}, {1, 1})},
               {"2x2 stride 2", {real({2, 3, 6, 5})}, pool({2, 2}, {2, 2}, {0, 0})},
               {"3x2 stride (1, 2) pad (1, 0)", {real({1, 2, 5, 7})}, pool({3, 2}, {1, 2}, {1, 0})},
               {"global 4x3", {real({2, 2, 4, 3})}, pool({4, 3}, {1, 1}, {0, 0})},
               {"40 channels, 3x2 stride 2 pad 1", {real({3, 40, 13, 11})}, pool({3, 2}, {2, 2}, {1, 1}), false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<Pool2dAttrs>(attrs);
    const Ref& x = in[0];
    const Shape out{x.shape[0], x.shape[1], conv_out(x.shape[2], a.kernel[0], a.stride[0], a.padding[0]),
                    conv_out(x.shape[3], a.kernel[1], a.stride[1], a.padding[1])};
    Ref y(out), idx(out);
    for_each_index(out, [&](const std::vector<int64_t>& o) {
      double best = -std::numeric_limits<double>::infinity();
      int64_t arg = -1;
      for (int64_t i = 0; i < a.kernel[0]; ++i)
        for (int64_t j = 0; j < a.kernel[1]; ++j) {
          const int64_t ih = tap(o[2], i, a.stride[0], a.padding[0], x.shape[2]);
          const int64_t iw = tap(o[3], j, a.stride[1], a.padding[1], x.shape[3]);
          if (ih < 0 || iw < 0) continue;
          const double v = x.at({o[0], o[1], ih, iw});
          if (arg < 0 || v > best) {
            best = v;
            arg = ih * x.shape[3] + iw;
          }
        }
      y.at(o) = best;
      idx.at(o) = double(arg);
    });
    return std::vector<Ref>{y, idx};
  };
  return c;
}

OpCase case_adaptive_avg_pool2d() {
  OpCase c;
  c.samples = {{"to 1x1", {real({2, 3, 6, 5})}, AdaptivePoolAttrs{{1, 1}}},
               {"overlapping bins", {real({2, 3, 5, 7})}, AdaptivePoolAttrs{{3, 4}}},
               {"larger than the input", {real({1, 2, 2, 3})}, AdaptivePoolAttrs{{3, 5}}},
               {"same size", {real({2, 2, 4, 3})}, AdaptivePoolAttrs{{4, 3}}},
               {"40 channels to 4x5", {real({3, 40, 13, 11})}, AdaptivePoolAttrs{{4, 5}}, false}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<AdaptivePoolAttrs>(attrs);
    const Ref& x = in[0];
    const int64_t H = x.shape[2], W = x.shape[3], oh = a.output[0], ow = a.output[1];
    Ref y(Shape{x.shape[0], x.shape[1], oh, ow});
    auto bin = [](int64_t i, int64_t n, int64_t out) {
      return std::pair<int64_t, int64_t>{int64_t(std::floor(double(i * n) / double(out))),
                                         int64_t(std::ceil(double((i + 1) * n) / double(out)))};
    };
    for_each_index(y.shape, [&](const std::vector<int64_t>& o) {
      const auto [h0, h1] = bin(o[2], H, oh);
      const auto [w0, w1] = bin(o[3], W, ow);
      double s = 0;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) s += x.at({o[0], o[1], h, w});
      y.at(o) = s / double((h1 - h0) * (w1 - w0));
    });
    return std::vector<Ref>{y};
  };
  return c;
}

}  // namespace qkv::test
