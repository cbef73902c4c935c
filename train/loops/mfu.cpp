#include "train/loops/mfu.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::loops {

double lm_train_flops_per_token(const nn::GPT& model, int64_t seq_len) {
  const auto& c = model.config();
  return 6.0 * double(model.num_parameters()) + 12.0 * double(c.layers) * double(seq_len) * double(c.d_model());
}

double measure_gemm_flops(const Device& device, int64_t n, int reps) {
  NoGradGuard no_grad;
  Generator gen(1);
  Tensor a = randn({n, n}, device, &gen), b = randn({n, n}, device, &gen);
  (void)matmul(a, b).cpu();  // warm-up: allocator, threads
  double best = INFINITY;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)matmul(a, b).cpu();  // .cpu() waits for the device
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * double(n) * double(n) * double(n) / best;
}

}  // namespace qkv::loops
