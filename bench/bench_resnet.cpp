// ResNet-34 feature-extraction benchmark on the CPU: milliseconds per batch of
// nn::ResNet34::features (inference, NoGradGuard, float32) for each image size, best and mean
// of a few runs after a warm-up, with the convolutions' GFLOP/s and the process CPU time per
// batch (on a shared machine, wall time well above CPU time / threads means waiting for cores).
// QKV_PROFILE=1 adds the time per op.
//
//   bench_resnet [--batch 64] [--sizes 32,64] [--reps 3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <omp.h>

#include "nn/models/resnet.h"

using namespace qkv;

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Multiply-adds of every convolution of `model` on one image of size x size.
double conv_macs(const nn::BasicResNet& model, int64_t size) {
  NoGradGuard ng;
  double macs = 0;
  // Each conv's output size follows from its input size; walk the same sequence as features().
  auto conv = [&](const nn::Conv2d& c, int64_t in) {
    const int64_t k = c.weight.size(2), out = (in + 2 * c.padding[0] - k) / c.stride[0] + 1;
    macs += double(c.weight.numel()) * double(out * out);
    return out;
  };
  int64_t s = conv(model.conv1, size);
  s = (s + 2 - 3) / 2 + 1;  // max pool 3/2 pad 1
  for (const nn::ResStage* stage : {&model.layer1, &model.layer2, &model.layer3, &model.layer4})
    for (const auto& b : stage->blocks) {
      if (b->downsample) conv(b->downsample->conv, s);
      s = conv(b->conv2, conv(b->conv1, s));
    }
  return macs;
}

void bench_size(const nn::ResNet34& model, int64_t batch, int64_t size, int reps) {
  Generator gen(static_cast<uint64_t>(size));
  const Tensor x = randn({batch, 3, size, size}, {}, &gen);
  NoGradGuard ng;
  model.features(x);  // warm up: allocator, threads
  double best = 1e30, total = 0;
  const double cpu0 = cpu_seconds();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    const Tensor f = model.features(x);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
  }
  const double cpu = (cpu_seconds() - cpu0) / reps;
  const double gflop = 2 * conv_macs(model, size) * double(batch) / 1e9;
  std::printf("%4lldx%-4lld %6lld %10.1f %10.1f %10.1f %10.1f %10.1f\n", (long long)size, (long long)size,
              (long long)batch, best * 1e3, total / reps * 1e3, cpu * 1e3, double(batch) / best, gflop / best);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ResNet-34 feature extraction on the CPU"};
  int64_t batch = 64;
  std::vector<int64_t> sizes{32, 64};
  int reps = 3;
  app.add_option("--batch", batch, "images per batch");
  app.add_option("--sizes", sizes, "image sizes (square)")->delimiter(',');
  app.add_option("--reps", reps, "timed runs per size");
  CLI11_PARSE(app, argc, argv);
  nn::ResNet34 model;
  std::printf("ResNet-34 features, float32, %d threads\n", omp_get_max_threads());
  std::printf("%9s %6s %10s %10s %10s %10s %10s\n", "size", "batch", "best ms", "mean ms", "cpu ms", "images/s",
              "conv GF/s");
  for (int64_t s : sizes) bench_size(model, batch, s, reps);
  return 0;
}
