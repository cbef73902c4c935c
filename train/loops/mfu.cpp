#include "train/loops/mfu.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::loops {
namespace {

struct KnownGpu {
  const char* name;   // a substring of the CUDA product name; the first match wins
  double bf16, fp32;  // dense TFLOP/s from NVIDIA's data sheets
};
// More specific names first ("H100 PCIe" before "H100").
constexpr KnownGpu kKnownGpus[] = {
    {"H200", 989.4, 66.9},  {"H100 PCIe", 756.5, 51.2}, {"H100 NVL", 835.5, 60.0}, {"H100", 989.4, 66.9},
    {"H800", 989.4, 66.9},  {"H20", 148.0, 44.0},       {"A100", 312.0, 19.5},     {"A800", 312.0, 19.5},
    {"L40S", 362.05, 91.6}, {"L4", 121.0, 30.3},        {"A10", 125.0, 31.2},
};

}  // namespace

double lm_train_flops_per_token(const nn::GPTConfig& c, int64_t seq_len) {
  return 6.0 * double(nn::gpt_parameter_count(c)) +
         12.0 * double(c.layers) * double(seq_len) * double(c.attention.query_width());
}

double measure_gemm_flops(const Device& device, int64_t n, int reps, DType dtype) {
  NoGradGuard no_grad;
  Generator gen(1);
  Tensor a = randn({n, n}, device, &gen).to(dtype), b = randn({n, n}, device, &gen).to(dtype);
  (void)matmul(a, b).cpu();  // warm-up: allocator, threads, the GEMM plan
  double best = INFINITY;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)matmul(a, b).cpu();  // .cpu() waits for the device
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * double(n) * double(n) * double(n) / best;
}

std::optional<double> known_peak_flops(std::string_view device_name, Precision precision) {
  for (const KnownGpu& g : kKnownGpus)
    if (device_name.find(g.name) != std::string_view::npos)
      return 1e12 * (precision == Precision::fp32 ? g.fp32 : g.bf16);  // f16's tensor-core rate is bf16's
  return std::nullopt;
}

PeakFlops peak_flops(const Device& device, Precision precision, double configured_tflops) {
  if (configured_tflops > 0) return {configured_tflops * 1e12, "configured (train.peak_tflops)"};
  const std::string name = device_name(device);
  if (device.is_cuda())
    if (const std::optional<double> known = known_peak_flops(name, precision))
      return {*known, cat(name, " ", precision_name(precision), " dense peak (data sheet)")};
  // The CPU computes bf16 and f16 runs in float32: its float32 GEMM is the peak either way.
  const DType dtype = device.is_cuda() ? autocast_dtype_for(precision).value_or(DType::f32) : DType::f32;
  const double measured = measure_gemm_flops(device, 1024, 4, dtype);
  return {measured, cat("measured ", dtype_name(dtype), " GEMM on ", name)};
}

}  // namespace qkv::loops
