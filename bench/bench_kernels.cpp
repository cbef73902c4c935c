// Kernel benchmark: matmul GFLOP/s through qkvlab against Eigen called directly on the same
// buffers, and elementwise / row-wise kernels' memory bandwidth against memcpy, all measured in
// this one process with the runs interleaved so machine noise hits both sides alike.
//
//   bench_kernels [--sizes 256,512,1024,2048] [--elements N] [--reps R] [--device cpu|cuda:0]
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <omp.h>

#include "autograd/autograd.h"
#include "tensor/cuda/cuda_runtime.h"

using namespace qkv;

namespace {

using Clock = std::chrono::steady_clock;

void sync(const Device& d) {
#ifdef QKV_HAVE_CUDA
  if (d.is_cuda()) cuda::synchronize(d.index);
#else
  (void)d;
#endif
}

// Best of `reps` timings of each function, run alternately.
std::vector<double> best_seconds(const std::vector<std::function<void()>>& fns, int reps, const Device& dev) {
  std::vector<double> best(fns.size(), 1e30);
  for (auto& f : fns) f();  // warm up: caches, allocator, thread pool
  sync(dev);
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      auto t0 = Clock::now();
      fns[i]();
      sync(dev);
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  return best;
}

void bench_matmul(const std::vector<int64_t>& sizes, int reps, const Device& dev) {
  std::printf("\nmatmul (float32, square, best of %d)\n", reps);
  std::printf("%8s %14s %14s %8s\n", "n", "qkvlab GF/s", dev.is_cpu() ? "Eigen GF/s" : "-", "ratio");
  for (int64_t n : sizes) {
    Generator g(n);
    Tensor a = randn({n, n}, {DType::f32, dev}, &g), b = randn({n, n}, {DType::f32, dev}, &g);
    const double flops = 2.0 * double(n) * double(n) * double(n);
    const int r = std::max<int>(2, int(reps * std::min(1.0, 2e9 / flops)));
    if (dev.is_cpu()) {
      using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      Eigen::Map<const RowMat> ma(a.data<float>(), n, n), mb(b.data<float>(), n, n);
      RowMat mc(n, n);
      auto t = best_seconds({[&] { Tensor c = matmul(a, b); }, [&] { mc.noalias() = ma * mb; }}, r, dev);
      std::printf("%8lld %14.1f %14.1f %7.1f%%\n", (long long)n, flops / t[0] / 1e9, flops / t[1] / 1e9,
                  100 * t[1] / t[0]);
    } else {
      auto t = best_seconds({[&] { Tensor c = matmul(a, b); }}, r, dev);
      std::printf("%8lld %14.1f %14s %8s\n", (long long)n, flops / t[0] / 1e9, "-", "-");
    }
  }
}

void bench_bandwidth(int64_t n, int reps, const Device& dev) {
  const int64_t cols = 1024, rows = n / cols;
  Generator g(7);
  Tensor x = randn({rows, cols}, {DType::f32, dev}, &g), y = randn({rows, cols}, {DType::f32, dev}, &g);
  Tensor w = ones({cols}, {DType::f32, dev}), bias = zeros({cols}, {DType::f32, dev});
  const double bytes = double(rows * cols) * 4;

  // The copy baseline: parallel memcpy on the CPU, a device-to-device copy on a GPU.
  Tensor dst = empty_like(x);
  std::function<void()> copy_fn;
  if (dev.is_cpu()) {
    copy_fn = [&] {
      const char* s = static_cast<const char*>(x.raw_data());
      char* d = static_cast<char*>(dst.raw_data());
      const int64_t total = x.nbytes(), chunk = (total + omp_get_max_threads() - 1) / omp_get_max_threads();
#pragma omp parallel for
      for (int t = 0; t < omp_get_max_threads(); ++t) {
        const int64_t b = t * chunk, e = std::min(total, b + chunk);
        if (b < e) std::memcpy(d + b, s + b, size_t(e - b));
      }
    };
  } else {
    copy_fn = [&] { dst.copy_(x); };
  }
  struct Case {
    const char* name;
    double bytes_moved;
    std::function<void()> fn;
  };
  std::vector<Case> cases = {
      {"memcpy", 2 * bytes, copy_fn},
      {"add", 3 * bytes, [&] { Tensor z = x + y; }},
      {"gelu", 2 * bytes, [&] { Tensor z = gelu(x); }},
      {"softmax", 2 * bytes, [&] { Tensor z = softmax(x, -1); }},
      {"layer_norm", 2 * bytes, [&] { Tensor z = layer_norm(x, w, bias); }},
  };
  std::vector<std::function<void()>> fns;
  for (auto& c : cases) fns.push_back(c.fn);
  auto t = best_seconds(fns, reps, dev);
  const double copy_bw = cases[0].bytes_moved / t[0];
  std::printf("\nbandwidth (float32 [%lld, %lld], %.0f MiB per tensor, best of %d)\n", (long long)rows, (long long)cols,
              bytes / (1 << 20), reps);
  std::printf("%12s %10s %14s\n", "kernel", "GB/s", "of memcpy");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double bw = cases[i].bytes_moved / t[i];
    std::printf("%12s %10.1f %13.1f%%\n", cases[i].name, bw / 1e9, 100 * bw / copy_bw);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qkvlab kernel benchmark: matmul vs Eigen, kernel bandwidth vs memcpy"};
  std::vector<int64_t> sizes{256, 512, 1024, 2048};
  int64_t elements = int64_t(1) << 24;
  int reps = 10;
  std::string device = "cpu";
  app.add_option("--sizes", sizes, "square matmul sizes")->delimiter(',');
  app.add_option("--elements", elements, "elements per tensor in the bandwidth test")
      ->check(CLI::Range(int64_t(1024), int64_t(1) << 32));
  app.add_option("--reps", reps, "timed repetitions (best is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--device", device, "cpu or cuda:N");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device dev(device);
    check_device_usable(dev, "bench_kernels");
    std::printf("qkvlab kernel benchmark on %s, %d OpenMP threads\n", dev.str().c_str(), omp_get_max_threads());
    bench_matmul(sizes, reps, dev);
    bench_bandwidth(elements, reps, dev);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
