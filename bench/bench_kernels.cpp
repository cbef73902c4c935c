// Kernel benchmark, all measured in this one process with the runs interleaved (best of N, each
// run followed by a device synchronize) so machine noise hits every side alike:
//   matmul     square n x n GEMM through qkvlab in --dtype (float32, or bf16 with float32
//              accumulation), GFLOP/s (2 n^3 FLOPs); on the CPU in float32 beside Eigen called
//              directly on the same buffers.
//   gemm       the paper's 300M GPT's GEMMs (6 x 2048 tokens, d 1024: qkv, proj, fc, fc_proj,
//              lm_head as x W^T) in --dtype; default on CUDA only (--gemm).
//   bandwidth  float32 [elements / 1024, 1024]: the copy baseline (parallel memcpy on the CPU,
//              a device-to-device copy_ on a GPU), add, gelu, dropout, relu_dropout,
//              relu_backward, softmax, layer_norm and layer_norm_backward, in GB/s of bytes read
//              + written, and as a share of the copy.
//   decode     one decode step's attention (a query row per head over a float32 cache) at
//              GPT-2 small's heads: QKV, K=V, GQA-4 and MQA at batch 8 over 1024 positions, QKV
//              and K=V at batch 1 over 4096, in GB/s of the cache bytes it must read, and as a
//              share of the copy.
//   attention  qkvlab's fused attention op in --dtype, forward and forward + backward
//              (bench/attention_bench.h): the models' shapes (GPT-2 small, the paper's 300M GPT,
//              a ViT/encoder shape, K=V, GQA-4) and FlashAttention's benchmark shapes (--attention
//              flash: causal, sequence 2048 and 4096, head dims 64 and 128), on the default kernels
//              and, with --attention-kernels default,mma, again on the mma.sync kernels where the
//              default runs the Hopper ones.
// On a GPU the GEMM and attention results are checked: a sampled block of each (the last rows and
// columns, where tile bounds live; attention's gradients too) against the same product on the CPU
// in float32; a relative error over 1e-4 (float32) or 1e-2 (bf16) fails the run (after the JSON is
// written), so a fast wrong kernel never reads as a result.
// bench/torch_kernels.py measures the same in PyTorch with the same FLOP counts and JSON keys;
// bench/compare_kernels.py prints the two JSON files side by side.
//
//   bench_kernels [--sizes 256,512,1024,2048] [--elements N] [--reps R] [--device cpu|cuda:0]
//                 [--dtype f32|bf16] [--gemm all|none] [--attention all,flash|none|case,case]
//                 [--attention-kernels default|default,mma] [--batch-div K] [--json FILE]
//
// --json writes {"implementation", "device", ..., "attention_shapes": {case: shape},
// "results": {key: number}} atomically; the keys are matmul.<n>.gflops (and
// matmul.<n>.eigen_gflops on the CPU), gemm.<name>.gflops, bandwidth.<kernel>.gbps,
// decode_attention.<case>.gbps and attention.<case>[@mma].{fwd,fwdbwd}_{ms,gflops}, and "attention_kernels"
// names the default path's kernels per case. Defaults: on CUDA the sizes add 4096 and
// the attention batches are the models' own; on the CPU the attention batches are divided by 8 (the ViT keeps 16 of
// 128) so the whole run stays near a minute on two cores.
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "bench/attention_bench.h"
#include "bench/bench_programs.h"
#include "bench/kernel_timing.h"
#include "io/atomic_file.h"

using namespace qkv;

namespace {

using Json = nlohmann::ordered_json;
using bench::best_seconds;
using bench::check_block;
using bench::reps_for;

// The last `rows` rows and `cols` columns of y = x w^T, against the CPU's float32 product.
void check_gemm_block(const std::string& what, const Tensor& x, const Tensor& w, const Tensor& y, DType dt) {
  const int64_t M = y.shape()[0], N = y.shape()[1], rows = std::min<int64_t>(64, M), cols = std::min<int64_t>(256, N);
  const Tensor xs = x.narrow(0, M - rows, rows).cpu().to(DType::f32),
               ws = w.narrow(0, N - cols, cols).cpu().to(DType::f32);
  check_block(what, y.narrow(0, M - rows, rows).narrow(1, N - cols, cols), matmul(xs, ws, false, true), dt);
}

void bench_matmul(const std::vector<int64_t>& sizes, int reps, const Device& dev, DType dt, Json& res) {
  const bool eigen = dev.is_cpu() && dt == DType::f32;
  std::printf("\nmatmul (%s, square, best of %d)\n", dtype_name(dt), reps);
  std::printf("%8s %14s %14s %8s\n", "n", "qkvlab GF/s", eigen ? "Eigen GF/s" : "-", "ratio");
  for (int64_t n : sizes) {
    Generator g(n);
    Tensor a = randn({n, n}, {DType::f32, dev}, &g).to(dt), b = randn({n, n}, {DType::f32, dev}, &g).to(dt);
    const double flops = 2.0 * double(n) * double(n) * double(n);
    const int r = reps_for(flops, reps, dev);
    const std::string key = "matmul." + std::to_string(n) + ".";
    if (eigen) {
      using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      Eigen::Map<const RowMat> ma(a.data<float>(), n, n), mb(b.data<float>(), n, n);
      RowMat mc(n, n);
      auto t = best_seconds({[&] { Tensor c = matmul(a, b); }, [&] { mc.noalias() = ma * mb; }}, r, dev);
      std::printf("%8lld %14.1f %14.1f %7.1f%%\n", (long long)n, flops / t[0] / 1e9, flops / t[1] / 1e9,
                  100 * t[1] / t[0]);
      res[key + "gflops"] = flops / t[0] / 1e9;
      res[key + "eigen_gflops"] = flops / t[1] / 1e9;
    } else {
      auto t = best_seconds({[&] { Tensor c = matmul(a, b); }}, r, dev);
      std::printf("%8lld %14.1f %14s %8s\n", (long long)n, flops / t[0] / 1e9, "-", "-");
      res[key + "gflops"] = flops / t[0] / 1e9;
    }
  }
}

// The 300M GPT's GEMMs (experiments/lm/gpt-300m.yaml: batch 6 x context 2048, d 1024, MLP 4096,
// vocab 50304 padded), each as x [M, K] times W [N, K] transposed, as nn::Linear computes them.
// bench/torch_kernels.py holds the same table.
struct GemmCase {
  const char* name;
  int64_t M, K, N;
};
constexpr GemmCase kGemmCases[] = {{"qkv", 12288, 1024, 3072},
                                   {"proj", 12288, 1024, 1024},
                                   {"fc", 12288, 1024, 4096},
                                   {"fc_proj", 12288, 4096, 1024},
                                   {"lm_head", 12288, 1024, 50304}};

void bench_gemm(int reps, const Device& dev, DType dt, Json& res) {
  std::printf("\ngemm (%s, the 300M GPT's shapes, x W^T, best of %d)\n", dtype_name(dt), reps);
  std::printf("%10s %24s %14s\n", "gemm", "M x K x N", "qkvlab GF/s");
  for (const GemmCase& c : kGemmCases) {
    Generator g(c.N);
    Tensor x = randn({c.M, c.K}, {DType::f32, dev}, &g).to(dt), w = randn({c.N, c.K}, {DType::f32, dev}, &g).to(dt);
    const double flops = 2.0 * double(c.M) * double(c.K) * double(c.N);
    auto t = best_seconds({[&] { Tensor y = matmul(x, w, false, true); }}, reps_for(flops, reps, dev), dev);
    std::printf("%10s %24s %14.1f\n", c.name, cat(c.M, " x ", c.K, " x ", c.N).c_str(), flops / t[0] / 1e9);
    if (!dev.is_cpu()) check_gemm_block(c.name, x, w, matmul(x, w, false, true), dt);
    res[cat("gemm.", c.name, ".gflops")] = flops / t[0] / 1e9;
  }
}

// Returns the copy's bandwidth (bytes read + written per second).
double bench_bandwidth(int64_t n, int reps, const Device& dev, Json& res) {
  const int64_t cols = 1024, rows = n / cols;
  Generator g(7);
  Tensor x = randn({rows, cols}, {DType::f32, dev}, &g), y = randn({rows, cols}, {DType::f32, dev}, &g);
  Tensor w = ones({cols}, {DType::f32, dev}), bias = zeros({cols}, {DType::f32, dev});
  Tensor row_mean = zeros({rows}, {DType::f32, dev}), row_rstd = ones({rows}, {DType::f32, dev});
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
    const char* name;  // printed
    const char* key;   // in the JSON
    double bytes_moved;
    std::function<void()> fn;
  };
  std::vector<Case> cases = {
      {dev.is_cpu() ? "memcpy" : "copy_", "copy", 2 * bytes, copy_fn},
      {"add", "add", 3 * bytes, [&] { Tensor z = x + y; }},
      {"gelu", "gelu", 2 * bytes, [&] { Tensor z = gelu(x); }},
      {"dropout", "dropout", 2 * bytes, [&] { Tensor z = dropout(x, 0.1, true, &g); }},
      {"relu_dropout", "relu_dropout", 2 * bytes, [&] { Tensor z = relu_dropout(x, 0.1, true, &g); }},
      {"relu_backward", "relu_backward", 3 * bytes, [&] { Tensor z = relu_backward(x, y); }},
      {"softmax", "softmax", 2 * bytes, [&] { Tensor z = softmax(x, -1); }},
      {"layer_norm", "layer_norm", 2 * bytes, [&] { Tensor z = layer_norm(x, w, bias); }},
      {"layer_norm_backward", "layer_norm_backward", 3 * bytes,
       [&] { LayerNormGrads z = layer_norm_backward(y, x, w, row_mean, row_rstd); }},
  };
  std::vector<std::function<void()>> fns;
  for (auto& c : cases) fns.push_back(c.fn);
  auto t = best_seconds(fns, reps, dev);
  const double copy_bw = cases[0].bytes_moved / t[0];
  std::printf("\nbandwidth (float32 [%lld, %lld], %.0f MiB per tensor, best of %d)\n", (long long)rows, (long long)cols,
              bytes / (1 << 20), reps);
  std::printf("%20s %10s %14s\n", "kernel", "GB/s", "of copy");
  for (size_t i = 0; i < cases.size(); ++i) {
    const double bw = cases[i].bytes_moved / t[i];
    std::printf("%20s %10.1f %13.1f%%\n", cases[i].name, bw / 1e9, 100 * bw / copy_bw);
    res[std::string("bandwidth.") + cases[i].key + ".gbps"] = bw / 1e9;
  }
  return copy_bw;
}

// One decode step's attention (a query row per head over a float32 cache of S positions) against
// the copy: it must read each cached K and V row once (K=V: one tensor; GQA/MQA: each KV head once
// for its group), so its bandwidth is those bytes over the time.
void bench_decode_attention(int reps, const Device& dev, double copy_bw, Json& res) {
  struct DecodeCase {
    const char* name;
    int64_t B, H, Hk, S;
    bool kv_shared;
  };
  const DecodeCase cases[] = {{"qkv_b8", 8, 12, 12, 1024, false}, {"kv_shared_b8", 8, 12, 12, 1024, true},
                              {"gqa4_b8", 8, 12, 3, 1024, false}, {"mqa_b8", 8, 12, 1, 1024, false},
                              {"qkv_b1", 1, 12, 12, 4096, false}, {"kv_shared_b1", 1, 12, 12, 4096, true}};
  const int64_t D = 64;
  std::printf("\ndecode attention (float32, one query row per head, causal over the caches of 12 layers, best of %d)\n",
              reps);
  std::printf("%14s %28s %10s %10s %10s\n", "case", "shape", "MB read", "GB/s", "of copy");
  for (const DecodeCase& c : cases) {
    Generator g(13);
    const TensorOptions o{DType::f32, dev};
    // One cache per layer of GPT-2 small, all read in each timed call: together larger than the
    // CPU's last-level cache, so the rows come from memory as in a decode step.
    constexpr int kLayers = 12;
    std::vector<Tensor> q, k, v;
    for (int l = 0; l < kLayers; ++l) {
      q.push_back(randn({c.B, c.H, 1, D}, o, &g));
      k.push_back(randn({c.B, c.Hk, c.S, D}, o, &g));
      v.push_back(c.kv_shared ? k.back() : randn({c.B, c.Hk, c.S, D}, o, &g));
    }
    NoGradGuard no_grad;
    auto t = best_seconds({[&] {
                            for (int l = 0; l < kLayers; ++l) Tensor out = attention(q[l], k[l], v[l], Tensor(), true);
                          }},
                          reps, dev);
    const double bytes = kLayers * (double(k[0].nbytes()) * (c.kv_shared ? 1 : 2) + 2.0 * double(q[0].nbytes()));
    const double bw = bytes / t[0];
    const std::string shape = cat("B", c.B, " H", c.H, " Hk", c.Hk, " S", c.S, c.kv_shared ? " k=v" : "");
    std::printf("%14s %28s %10.1f %10.1f %9.1f%%\n", c.name, shape.c_str(), bytes / 1e6, bw / 1e9, 100 * bw / copy_bw);
    res[std::string("decode_attention.") + c.name + ".gbps"] = bw / 1e9;
  }
}

}  // namespace

int bench_kernels_main(int argc, char** argv) {
  CLI::App app{"qkvlab kernel benchmark: matmul vs Eigen, kernel bandwidth vs copy, fused attention"};
  std::vector<int64_t> sizes;
  int64_t elements = int64_t(1) << 24;
  int64_t batch_div = 0;
  int reps = 10;
  std::string device = "cpu", which = "all", json_path, dtype = "f32", gemm, kernel_paths = "default";
  app.add_option("--sizes", sizes, "square matmul sizes (default 256,512,1024,2048, and 4096 on CUDA)")->delimiter(',');
  app.add_option("--elements", elements, "elements per tensor in the bandwidth test")
      ->check(CLI::Range(int64_t(1024), int64_t(1) << 32));
  app.add_option("--reps", reps, "timed repetitions (best is reported)")->check(CLI::Range(1, 1000));
  app.add_option("--device", device, "cpu or cuda:N");
  app.add_option("--dtype", dtype, "matmul, gemm and attention dtype: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--gemm", gemm, "the 300M GPT's GEMM shapes: all or none (default all on CUDA, none on the CPU)")
      ->check(CLI::IsMember({"all", "none"}));
  app.add_option("--attention", which,
                 "attention cases, comma-separated: all (the models' shapes), flash (FlashAttention's benchmark "
                 "shapes), none, or cases gpt2_small,gpt_300m,vit,flash_t4096_d128,...");
  app.add_option("--attention-kernels", kernel_paths,
                 "default, or default,mma: each attention case again on the mma.sync kernels where the default "
                 "runs the Hopper ones (QKV_ATTENTION_KERNELS=mma)");
  app.add_option("--batch-div", batch_div, "divide the attention batches by this (default 8 on the CPU, 1 on CUDA)")
      ->check(CLI::Range(int64_t(0), int64_t(1024)));
  app.add_option("--json", json_path, "also write every number to this JSON file (atomically)");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device dev(device);
    check_device_usable(dev, "--device");
    if (sizes.empty())
      sizes =
          dev.is_cpu() ? std::vector<int64_t>{256, 512, 1024, 2048} : std::vector<int64_t>{256, 512, 1024, 2048, 4096};
    if (batch_div == 0) batch_div = dev.is_cpu() ? 8 : 1;
    const std::vector<bench::AttnCase> cases = bench::select_attention_cases(which, batch_div);
    const std::vector<std::string> paths = bench::parse_kernel_paths(kernel_paths);
    const DType dt = parse_dtype(dtype);
    if (gemm.empty()) gemm = dev.is_cuda() ? "all" : "none";
    std::printf("qkvlab kernel benchmark on %s (%s), %d OpenMP threads, %s\n", dev.str().c_str(),
                device_name(dev).c_str(), omp_get_max_threads(), dtype_name(dt));
    Json res = Json::object(), shapes = Json::object(), attention_kernels = Json::object();
    bench_matmul(sizes, reps, dev, dt, res);
    if (gemm == "all") bench_gemm(reps, dev, dt, res);
    const double copy_bw = bench_bandwidth(elements, reps, dev, res);
    bench_decode_attention(reps, dev, copy_bw, res);
    bench::bench_attention(cases, paths, reps, dev, dt, res, shapes, attention_kernels);
    if (!json_path.empty()) {
      Json j = {{"implementation", "qkvlab"},
                {"device", dev.str()},
                {"device_name", device_name(dev)},
                {"dtype", dtype_name(dt)},
                {"threads", omp_get_max_threads()},
                {"reps", reps},
                {"elements", elements},
                {"batch_div", batch_div},
                {"timing", "best of N, wall clock around each call plus a device synchronize"},
                {"attention_shapes", shapes},
                {"attention_kernels", attention_kernels},
                {"results", res}};
      write_file_atomically(json_path, [&](std::ostream& os) { os << j.dump(2) << "\n"; });
      std::printf("\nwrote %s\n", json_path.c_str());
    }
    if (bench::failed_checks() > 0) {
      std::fprintf(stderr,
                   "bench_kernels: %d sampled block(s) differ from the CPU: the numbers above are of wrong results\n",
                   bench::failed_checks());
      return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}

#ifndef QKV_BENCH_MULTI  // bench_multi.cpp holds the main of the program that bundles this one
int main(int argc, char** argv) { return bench_kernels_main(argc, argv); }
#endif
