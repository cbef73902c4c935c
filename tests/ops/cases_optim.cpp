// Test cases for the optimizer ops (adam_update, sgd_update, clip_grad_norm), which update their
// inputs in place: each reference returns the expected new values of the written inputs, from
// plain loops in double following PyTorch's formulas (torch.optim.Adam / AdamW on the
// single-tensor path, torch.optim.SGD with dampening 0, torch.nn.utils.clip_grad_norm_). Also the
// in-place rules call_op enforces for them.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "autograd/dispatch.h"
#include "tests/ops/references.h"

namespace qkv::test {

namespace {

// The shapes every sample mixes in one call: a matrix, a 0-dim tensor, a 1-element tensor.
const std::vector<Shape> kMixed = {{2, 3}, {}, {1}};

// One group per shape: (param, grad, exp_avg, exp_avg_sq).
std::vector<InputSpec> adam_groups(const std::vector<Shape>& shapes) {
  std::vector<InputSpec> in;
  for (const Shape& s : shapes)
    for (InputSpec spec : {real(s), real(s), real(s), positive(s)}) in.push_back(constant(spec));
  return in;
}

// One group per shape: (param, grad, momentum_buffer), the buffer left out without momentum.
std::vector<InputSpec> sgd_groups(const std::vector<Shape>& shapes, bool momentum) {
  std::vector<InputSpec> in;
  for (const Shape& s : shapes)
    for (InputSpec spec : {real(s), real(s), momentum ? real(s) : absent()}) in.push_back(constant(spec));
  return in;
}

// Sized for the CUDA kernels' multi-tensor paths (kernels/cuda/optim.cu: at most 48 tensors per
// launch, 4096 elements per block): 52 tensors of uneven sizes, so two launches, with an empty
// one, 0-dim ones, and in the middle one of 9003 elements spanning three blocks.
std::vector<Shape> many_shapes() {
  std::vector<Shape> shapes;
  for (int64_t i = 0; i < 52; ++i) {
    if (i == 30) shapes.push_back({3, 3001});
    else if (i == 7) shapes.push_back({0, 4});
    else if (i % 4 == 0) shapes.push_back({});
    else shapes.push_back({i % 5 + 1, 3 * i + 1});
  }
  return shapes;
}

std::vector<InputSpec> grads(const std::vector<Shape>& shapes) {
  std::vector<InputSpec> in;
  for (const Shape& s : shapes) in.push_back(constant(real(s)));
  return in;
}

}  // namespace

OpCase case_adam_update() {
  OpCase c;
  const auto adam = [](double wd, int64_t step, bool decoupled) {
    return AdamAttrs{
        .lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = wd, .step = step, .decoupled = decoupled};
  };
  c.samples = {{"Adam, step 1", adam_groups(kMixed), adam(0, 1, false)},
               {"Adam, L2 decay, step 7", adam_groups({{4}, {3, 2}, {}}), adam(0.1, 7, false)},
               {"AdamW, step 1", adam_groups(kMixed), adam(0.1, 1, true)},
               {"AdamW, step 7", adam_groups({{5}, {1}, {2, 2, 2}}), adam(0.3, 7, true)},
               {"AdamW without decay, one group", adam_groups({{3, 4}}), adam(0, 7, true)},
               {"AdamW, 52 groups of uneven sizes", adam_groups(many_shapes()), adam(0.1, 3, true)},
               {"Adam, L2 decay, 52 groups of uneven sizes", adam_groups(many_shapes()), adam(0.05, 12, false)}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<AdamAttrs>(attrs);
    const double bc1 = 1 - std::pow(a.beta1, double(a.step)), bc2 = 1 - std::pow(a.beta2, double(a.step));
    std::vector<Ref> written;
    for (size_t i = 0; i < in.size(); i += 4) {
      Ref p = in[i], m = in[i + 2], v = in[i + 3];
      for (size_t e = 0; e < p.v.size(); ++e) {
        double g = in[i + 1].v[e];
        if (a.decoupled) p.v[e] *= 1 - a.lr * a.weight_decay;
        else g += a.weight_decay * p.v[e];
        m.v[e] = a.beta1 * m.v[e] + (1 - a.beta1) * g;
        v.v[e] = a.beta2 * v.v[e] + (1 - a.beta2) * g * g;
        p.v[e] -= a.lr / bc1 * m.v[e] / (std::sqrt(v.v[e]) / std::sqrt(bc2) + a.eps);
      }
      written.insert(written.end(), {p, m, v});
    }
    return written;
  };
  return c;
}

OpCase case_sgd_update() {
  OpCase c;
  const auto sgd = [](double momentum, double wd, bool nesterov, bool first) {
    return SgdAttrs{.lr = 0.1, .momentum = momentum, .weight_decay = wd, .nesterov = nesterov, .first = first};
  };
  c.samples = {{"plain", sgd_groups(kMixed, false), sgd(0, 0, false, false)},
               {"weight decay", sgd_groups({{4}, {2, 3}}, false), sgd(0, 0.05, false, true)},
               {"momentum, first update", sgd_groups(kMixed, true), sgd(0.9, 0, false, true)},
               {"momentum, weight decay", sgd_groups({{3}, {}, {2, 2}}, true), sgd(0.9, 0.05, false, false)},
               {"nesterov, first update", sgd_groups(kMixed, true), sgd(0.8, 0.05, true, true)},
               {"nesterov", sgd_groups({{1}, {4, 2}}, true), sgd(0.8, 0.05, true, false)},
               {"plain, 52 groups", sgd_groups(many_shapes(), false), sgd(0, 0.01, false, false)},
               {"momentum, first update, 52 groups", sgd_groups(many_shapes(), true), sgd(0.9, 0, false, true)},
               {"nesterov, weight decay, 52 groups", sgd_groups(many_shapes(), true), sgd(0.9, 0.01, true, false)}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const auto& a = std::get<SgdAttrs>(attrs);
    std::vector<Ref> written;
    for (size_t i = 0; i < in.size(); i += 3) {
      Ref p = in[i], buf = in[i + 2];  // buf: empty without momentum
      for (size_t e = 0; e < p.v.size(); ++e) {
        double d = in[i + 1].v[e] + a.weight_decay * p.v[e];
        if (a.momentum != 0) {
          buf.v[e] = a.first ? d : a.momentum * buf.v[e] + d;
          d = a.nesterov ? d + a.momentum * buf.v[e] : buf.v[e];
        }
        p.v[e] -= a.lr * d;
      }
      written.insert(written.end(), {p, buf});
    }
    return written;
  };
  return c;
}

OpCase case_clip_grad_norm() {
  OpCase c;
  const std::vector<Shape> shapes = {{2, 3}, {}, {1}, {4}};
  c.samples = {{"max_norm above the norm", grads(shapes), ClipAttrs{1e3}},
               {"max_norm below the norm", grads(shapes), ClipAttrs{0.5}},
               {"one grad, scaled", grads({{3, 2}}), ClipAttrs{0.25}},
               {"max_norm +inf only measures", grads(shapes), ClipAttrs{INFINITY}},
               {"52 grads, scaled", grads(many_shapes()), ClipAttrs{1.0}},
               {"52 grads, max_norm above the norm", grads(many_shapes()), ClipAttrs{1e4}},
               {"52 grads, max_norm +inf only measures", grads(many_shapes()), ClipAttrs{INFINITY}},
               {"unscaled by 1/8, then clipped", grads(shapes), ClipAttrs{0.1, 0.125}},
               {"unscaled by 1/1024, not clipped", grads(shapes), ClipAttrs{1e3, 1.0 / 1024}},
               {"52 grads unscaled by 1/4, max_norm +inf", grads(many_shapes()), ClipAttrs{INFINITY, 0.25}}};
  // PyTorch's GradScaler.unscale_ then clip_grad_norm_: the grads times unscale, then clipped.
  c.reference = [](const std::vector<Ref>& in, const Attrs& attrs) {
    const ClipAttrs& a = std::get<ClipAttrs>(attrs);
    double total = 0;
    for (const Ref& g : in)
      for (double x : g.v) total += x * a.unscale * x * a.unscale;
    Ref norm(Shape{}, std::sqrt(total));
    const double factor = a.max_norm / (norm.v[0] + 1e-6);
    std::vector<Ref> out = {norm};
    for (const Ref& g : in)
      out.push_back(map1(g, [&](double x) { return x * a.unscale * (factor < 1 ? factor : 1.0); }));
    return out;
  };
  return c;
}

// ---- groups of both float dtypes in one call ------------------------------------------------------

namespace {

// A call's inputs on the CPU and the same values on the GPU (when one is visible). The harness
// gives every input of a sample one dtype and hands CUDA contiguous inputs; these calls mix
// float32 and float64 groups and pass 2-D grads as transposed (non-contiguous) views.
struct MixedCall {
  std::vector<Tensor> cpu, gpu;
  bool on_gpu = cuda_available();

  void add(const Shape& s, DType dt, Generator& gen, bool strided, bool positive) {
    if (strided && s.size() == 2) {
      const Tensor base = randn({s[1], s[0]}, {dt, kCPU}, &gen);
      cpu.push_back(base.transpose(0, 1));
      if (on_gpu) gpu.push_back(base.to(Device("cuda:0")).transpose(0, 1));
      return;
    }
    Tensor t = randn(s, {dt, kCPU}, &gen);
    if (positive) t = abs(t) + 0.5;
    cpu.push_back(t);
    if (on_gpu) gpu.push_back(t.to(Device("cuda:0")));
  }
  // The inputs at `written` positions of each group of `group` match CPU against CUDA.
  void expect_same(size_t group, std::initializer_list<size_t> written) const {
    if (!on_gpu) return;
    for (size_t i = 0; i < cpu.size(); i += group)
      for (size_t w : written) {
        if (!cpu[i + w].defined()) continue;
        const double tol = cpu[i + w].dtype() == DType::f64 ? 1e-9 : 2e-5;
        const std::vector<double> want = cpu[i + w].to_vector<double>(), got = gpu[i + w].to_vector<double>();
        REQUIRE(got.size() == want.size());
        size_t e = 0;
        while (e < want.size() && std::abs(got[e] - want[e]) <= tol + tol * std::abs(want[e])) ++e;
        if (e < want.size()) FAIL_CHECK("input ", i + w, " element ", e, ": CUDA ", got[e], ", CPU ", want[e]);
      }
  }
};

DType dtype_of_group(size_t i) { return i % 3 == 1 ? DType::f64 : DType::f32; }

}  // namespace

TEST_CASE("optimizer ops: float32 and float64 groups in one call, strided grads, CUDA as CPU") {
  NoGradGuard no_grad;
  Generator gen(42);
  const std::vector<Shape> shapes = many_shapes();
  SUBCASE("adam_update") {
    MixedCall call;
    for (size_t i = 0; i < shapes.size(); ++i) {
      call.add(shapes[i], dtype_of_group(i), gen, false, false);
      call.add(shapes[i], dtype_of_group(i), gen, true, false);
      call.add(shapes[i], dtype_of_group(i), gen, false, false);
      call.add(shapes[i], dtype_of_group(i), gen, false, true);
    }
    const AdamAttrs attrs{.lr = 0.01, .weight_decay = 0.1, .step = 5, .decoupled = true};
    const Tensor p30 = call.cpu[4 * 30].clone();
    adam_update_(call.cpu, attrs);
    CHECK(call.cpu[4 * 30].to_vector<double>() != p30.to_vector<double>());
    if (call.on_gpu) adam_update_(call.gpu, attrs);
    call.expect_same(4, {0, 2, 3});
  }
  SUBCASE("sgd_update") {
    MixedCall call;
    for (size_t i = 0; i < shapes.size(); ++i) {
      call.add(shapes[i], dtype_of_group(i), gen, false, false);
      call.add(shapes[i], dtype_of_group(i), gen, true, false);
      call.add(shapes[i], dtype_of_group(i), gen, false, false);
    }
    const SgdAttrs attrs{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
    sgd_update_(call.cpu, attrs);
    if (call.on_gpu) sgd_update_(call.gpu, attrs);
    call.expect_same(3, {0, 2});
  }
  SUBCASE("clip_grad_norm") {
    MixedCall call;
    double total = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      call.add(shapes[i], dtype_of_group(i), gen, false, false);
      for (double x : call.cpu.back().to_vector<double>()) total += x * x;
    }
    const Tensor norm = clip_grad_norm_(call.cpu, 2.0);
    CHECK(norm.item<double>() == doctest::Approx(std::sqrt(total)).epsilon(1e-12));
    if (!call.on_gpu) return;
    const Tensor gnorm = clip_grad_norm_(call.gpu, 2.0);
    CHECK(gnorm.is_cuda());
    CHECK(gnorm.item<double>() == doctest::Approx(norm.item<double>()).epsilon(1e-12));
    call.expect_same(1, {0});
  }
}

// ---- the in-place rules call_op enforces ---------------------------------------------------------

TEST_CASE("in-place ops: a written input that requires grad is refused while grad mode is on") {
  Tensor p = ones({3}).set_requires_grad(), g = ones({3}), m = zeros({3}), v = zeros({3});
  const AdamAttrs attrs{.lr = 0.1, .step = 1};
  CHECK_THROWS_WITH_AS(adam_update_({p, g, m, v}, attrs),
                       doctest::Contains("adam_update: input 0 (float32 [3]) is a leaf tensor that requires grad"),
                       AutogradError);
  CHECK_THROWS_WITH_AS(adam_update_({p, g, m, v}, attrs), doctest::Contains("NoGradGuard"), AutogradError);
  CHECK(p.to_vector<double>() == std::vector<double>{1, 1, 1});
  NoGradGuard no_grad;
  adam_update_({p, g, m, v}, attrs);
  CHECK(p.to_vector<double>()[0] == doctest::Approx(0.9));
}

TEST_CASE("in-place ops: every written input's storage version is bumped, the read-only ones' are not") {
  Tensor p = ones({3}), g = ones({3}), m = zeros({3}), v = zeros({3});
  const uint64_t before_p = p.storage()->version(), before_g = g.storage()->version();
  const uint64_t before_m = m.storage()->version(), before_v = v.storage()->version();
  adam_update_({p, g, m, v}, AdamAttrs{.lr = 0.1, .step = 1});
  CHECK(p.storage()->version() == before_p + 1);
  CHECK(m.storage()->version() == before_m + 1);
  CHECK(v.storage()->version() == before_v + 1);
  CHECK(g.storage()->version() == before_g);
  const Tensor norm = clip_grad_norm_({g}, 1.0);
  CHECK(g.storage()->version() == before_g + 1);
  CHECK(norm.dim() == 0);
  CHECK(norm.dtype() == DType::f64);
  CHECK(norm.item<double>() == doctest::Approx(std::sqrt(3.0)));
}

TEST_CASE("in-place ops: a saved tensor updated in place makes backward refuse") {
  Tensor p = ones({3}).set_requires_grad();
  Tensor y = sum(p * p);  // saves p
  {
    NoGradGuard no_grad;
    sgd_update_({p, ones({3}), Tensor()}, SgdAttrs{.lr = 0.1});
  }
  CHECK_THROWS_AS(y.backward(), AutogradError);
}

TEST_CASE("in-place ops: groups are checked one by one") {
  NoGradGuard no_grad;
  const Tensor p = ones({2, 3}), g = ones({2, 3}), q = ones({4});
  const AdamAttrs adam{.lr = 0.1, .step = 1};
  CHECK_THROWS_WITH_AS(adam_update_({p, g, zeros({2, 3}), zeros({2, 3}), q, ones({4}), zeros({3}), zeros({4})}, adam),
                       doctest::Contains("adam_update: group 1: exp_avg float32 [3] does not match param float32 [4]"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(adam_update_({p, g, zeros({2, 3})}, adam),
                       doctest::Contains("adam_update: expected one or more groups of 4 inputs, got 3"), ValueError);
  CHECK_THROWS_WITH_AS(sgd_update_({p, ones({2, 3}, DType::f64), Tensor()}, SgdAttrs{.lr = 0.1}),
                       doctest::Contains("sgd_update: group 0: grad float64 [2, 3] does not match param float32"),
                       DTypeError);
  CHECK_THROWS_WITH_AS(sgd_update_({p, ones({2, 3}), Tensor()}, SgdAttrs{.lr = 0.1, .momentum = 0.9}),
                       doctest::Contains("sgd_update: group 0 has no momentum_buffer"), ValueError);
  CHECK_THROWS_WITH_AS(clip_grad_norm_({ones({3}), ones({2, 2}).transpose(0, 1)}, 1.0),
                       doctest::Contains("clip_grad_norm: input 1 (float32 [2, 2]) must be contiguous"), ValueError);
}

}  // namespace qkv::test
