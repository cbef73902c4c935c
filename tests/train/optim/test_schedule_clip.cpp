// Tests of the learning-rate schedules and clip_grad_norm (train/optim/).
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "autograd/autograd.h"
#include "tests/train/optim/optim_reference.h"
#include "train/optim/clip.h"
#include "train/optim/schedule.h"
#include "train/optim/sgd.h"

using namespace qkv;
using namespace qkv::optim;
using namespace qkv::test;

// ---- schedules ---------------------------------------------------------------------------------

TEST_CASE("optim: CosineWarmup warms up linearly, then follows a cosine to min_lr") {
  const CosineWarmup s(1.0, 10, 110, 0.1);
  CHECK(s.lr_at(0) == doctest::Approx(0.1));  // (0 + 1) / 10
  CHECK(s.lr_at(4) == doctest::Approx(0.5));
  CHECK(s.lr_at(9) == doctest::Approx(1.0));    // warmup end
  CHECK(s.lr_at(10) == doctest::Approx(1.0));   // cosine start
  CHECK(s.lr_at(60) == doctest::Approx(0.55));  // halfway: (base + min) / 2
  CHECK(s.lr_at(35) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s.lr_at(110) == doctest::Approx(0.1));
  CHECK(s.lr_at(5000) == 0.1);
  CHECK(s.lr_at(59) > s.lr_at(61));
  const CosineWarmup no_warmup(2.0, 0, 4);
  CHECK(no_warmup.lr_at(0) == doctest::Approx(2.0));
  CHECK(no_warmup.lr_at(2) == doctest::Approx(1.0));
  CHECK(no_warmup.lr_at(4) == doctest::Approx(0.0));
}

TEST_CASE("optim: MultiStepLR and ConstantLR") {
  const MultiStepLR s(1.0, {3, 6}, 0.5);
  CHECK(s.lr_at(0) == 1.0);
  CHECK(s.lr_at(2) == 1.0);
  CHECK(s.lr_at(3) == 0.5);
  CHECK(s.lr_at(5) == 0.5);
  CHECK(s.lr_at(6) == 0.25);
  CHECK(s.lr_at(1000) == 0.25);
  CHECK(MultiStepLR(0.3, {}).lr_at(10) == 0.3);
  CHECK(ConstantLR(0.25).lr_at(12345) == 0.25);
  // A schedule drives the optimizer through set_lr.
  Tensor p = leaf(kInit);
  SGD opt({{"w", p}}, {.lr = 1.0});
  opt.set_lr(s.lr_at(4));
  CHECK(opt.lr() == 0.5);
}

TEST_CASE("optim: schedules reject bad arguments") {
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, 10, 10), doctest::Contains("total_steps"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, -1, 10), doctest::Contains("warmup_steps"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(0.1, 1, 10, 0.2), doctest::Contains("min_lr"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(-1.0, 1, 10), doctest::Contains("base_lr"), ValueError);
  CHECK_THROWS_WITH_AS(CosineWarmup(1.0, 1, 10).lr_at(-1), doctest::Contains("step >= 0"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {5, 3}), doctest::Contains("strictly increasing"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {-2}), doctest::Contains("negative"), ValueError);
  CHECK_THROWS_WITH_AS(MultiStepLR(1.0, {2}, 0.0), doctest::Contains("gamma"), ValueError);
  CHECK_THROWS_WITH_AS(ConstantLR(std::nan("")), doctest::Contains("lr"), ValueError);
}

// ---- clip_grad_norm ----------------------------------------------------------------------------

TEST_CASE("optim: clip_grad_norm returns the global norm and scales grads above max_norm") {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor a = from_vector(std::vector<double>{3, 4}, {2}).to(dtype).set_requires_grad();
    Tensor b = from_vector(std::vector<double>{0, 0, 0, 0}, {2, 2}).to(dtype).set_requires_grad();
    Tensor c = zeros({3}, dtype).set_requires_grad();  // no grad: ignored
    a.set_grad(from_vector(std::vector<double>{3, 4}, {2}).to(dtype));
    // b's grad is a transposed view: it is clipped through a contiguous copy.
    b.set_grad(from_vector(std::vector<double>{12, 0, 0, 0}, {2, 2}).to(dtype).transpose(0, 1));
    const NamedTensors params = {{"a", a}, {"b", b}, {"c", c}};

    CHECK(clip_grad_norm(params, 100.0).item<double>() == doctest::Approx(13.0));
    CHECK(values(a.grad()) == std::vector<double>{3, 4});  // below max_norm: untouched

    CHECK(clip_grad_norm(params, 6.5).item<double>() == doctest::Approx(13.0));
    const double f = 6.5 / (13.0 + 1e-6);
    check_close(values(a.grad()), {3 * f, 4 * f}, 1e-6);
    check_close(values(b.grad()), {12 * f, 0, 0, 0}, 1e-6);
    CHECK(clip_grad_norm(params, 1e9).item<double>() == doctest::Approx(6.5).epsilon(1e-6));
    CHECK_FALSE(c.grad().defined());
  }
}

TEST_CASE("optim: clip_grad_norm leaves grads alone when the norm is not finite") {
  Tensor a = zeros({3}, DType::f32).set_requires_grad();
  a.set_grad(from_vector(std::vector<float>{1, INFINITY, 2}));
  CHECK(std::isinf(clip_grad_norm({{"a", a}}, 1.0).item<double>()));
  CHECK(values(a.grad())[0] == 1.0);
  a.set_grad(from_vector(std::vector<float>{1, NAN, 2}));
  CHECK(std::isnan(clip_grad_norm({{"a", a}}, 1.0).item<double>()));
  CHECK(values(a.grad())[2] == 2.0);
  CHECK_THROWS_WITH_AS(clip_grad_norm({{"a", a}}, 0.0), doctest::Contains("max_norm"), ValueError);
  CHECK_THROWS_AS(clip_grad_norm({{"a", a}}, -1.0), ValueError);
}
