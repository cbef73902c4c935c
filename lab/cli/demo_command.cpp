// qkvlab demo: trains a small MLP on a three-arm spiral with the engine (forward, backward,
// optim::SGD with momentum) and prints the loss falling; a smoke test of the whole stack.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "autograd/autograd.h"
#include "lab/cli/commands.h"
#include "lab/cli/device_option.h"

namespace qkv::cli {
namespace {

struct DemoOptions {
  int steps = 300;
  int hidden = 64;
  double lr = 0.1;
  uint64_t seed = 0;
  Device device;
};

// Points on three interleaved spiral arms; the class is the arm.
void spiral(int per_class, Tensor& x, Tensor& y, Generator& gen) {
  const int n = 3 * per_class;
  std::vector<float> noise = randn({n, 2}, {}, &gen).to_vector<float>();
  std::vector<float> xs(size_t(n) * 2);
  std::vector<int64_t> ys(static_cast<size_t>(n));
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per_class; ++i) {
      const int k = c * per_class + i;
      const double r = double(i) / per_class, t = 4.0 * c + 4.0 * r;
      xs[size_t(2 * k)] = float(r * std::sin(t) + 0.05 * noise[size_t(2 * k)]);
      xs[size_t(2 * k + 1)] = float(r * std::cos(t) + 0.05 * noise[size_t(2 * k + 1)]);
      ys[size_t(k)] = c;
    }
  x = from_vector(xs, {n, 2});
  y = from_vector(ys, {n});
}

void run_demo(const DemoOptions& o) {
  const Device dev = o.device;
  Generator gen(o.seed);
  Tensor x, y;
  spiral(100, x, y, gen);
  x = x.to(dev);
  y = y.to(dev);
  auto param = [&](Shape s, double scale) {
    Tensor p = (randn(s, {DType::f32, dev}, &gen) * scale).detach();
    return p.set_requires_grad();
  };
  const int h = o.hidden;
  std::vector<Tensor> params = {param({2, h}, 1.0),
                                param({h}, 0.0),
                                param({h, h}, 1.0 / std::sqrt(h)),
                                param({h}, 0.0),
                                param({h, 3}, 1.0 / std::sqrt(h)),
                                param({3}, 0.0)};
  std::vector<Tensor> velocity;
  for (const Tensor& p : params) velocity.push_back(zeros_like(p));
  auto forward = [&] {
    Tensor a = gelu(matmul(x, params[0]) + params[1]);
    Tensor b = gelu(matmul(a, params[2]) + params[3]);
    return matmul(b, params[4]) + params[5];
  };
  std::printf("demo: MLP 2-%d-%d-3 on a 300-point spiral, optim::SGD momentum 0.9, lr %g, on %s\n", h, h, o.lr,
              dev.str().c_str());
  for (int step = 0; step <= o.steps; ++step) {
    Tensor logits = forward();
    Tensor loss = cross_entropy(logits, y);
    if (step % 50 == 0 || step == o.steps) {
      const double acc = mean(cast(eq(argmax(logits, 1), y), DType::f32)).item<float>();
      std::printf("step %4d  loss %.4f  accuracy %.3f\n", step, loss.item<float>(), acc);
    }
    if (step == o.steps) break;
    for (Tensor& p : params) p.zero_grad();
    loss.backward();
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      velocity[i].copy_(velocity[i] * 0.9 + params[i].grad());
      params[i].copy_(params[i] - velocity[i] * o.lr);
    }
  }
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto opts = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand("demo", "Train a small MLP with the engine and print its loss falling");
  cmd->add_option("--steps", opts->steps, "SGD steps")->check(CLI::Range(1, 1000000));
  cmd->add_option("--hidden", opts->hidden, "hidden width")->check(CLI::Range(1, 65536));
  cmd->add_option("--lr", opts->lr, "learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "random seed");
  add_device_option(cmd, opts->device, "demo");
  cmd->callback([opts] { run_demo(*opts); });
}

}  // namespace qkv::cli
