// bench_gpt on a GPU (bench_gpt --device cuda:0): the training step of an experiment file's GPT
// (the paper's 300M by default) in one precision, qkvlab beside its PyTorch twins (eager with
// F.scaled_dot_product_attention, torch.compile) taking turns on the same card, each step ended
// by a device synchronize; per contestant tokens/s, MFU against the card's data-sheet dense peak
// and the device memory peak, and each peer's tokens/s over qkvlab's.
#pragma once
#include <string>

#include "bench/gpt_step.h"

namespace qkv::bench {

struct GpuStepOptions {
  Device device;
  nn::Variant variant;
  GPTShape shape;
  std::string precision = "bf16";  // fp32 or bf16 (train.precision's meaning)
  int steps = 10, rounds = 2;
  std::string peers;        // --peers
  double peer_timeout = 0;  // seconds a twin may take to be ready (0: no limit)
};

// Prints the step's tables (Markdown); 0, or 1 when qkvlab's own step could not run.
int run_gpu_step_bench(const GpuStepOptions& o);

}  // namespace qkv::bench
