// What bench_gpt's CPU and GPU halves share: the training step they time (forward and loss under
// an optional autocast, backward, AdamW, zero_grad) on a device, its FLOPs, the shape read from an
// experiment file, and the twins' arguments for it.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "nn/models/gpt.h"
#include "nn/variant.h"
#include "train/optim/adam.h"

namespace qkv::bench {

// The GPT on `device`, its optimizer and random tokens [B, T] there, warmed up by two steps; the
// forward and the loss run under `autocast` (none: float32).
struct GPTStep {
  Generator gen{0};
  nn::GPT model;
  std::unique_ptr<optim::AdamW> opt;
  Tensor ids, targets;
  std::optional<DType> autocast;
  GPTStep(const nn::GPTConfig& c, int64_t B, int64_t T, std::optional<DType> autocast_to, const Device& device = kCPU);
  void run();
};

// A GPT shape from an experiment file at a scale (model.*: layers, width, heads, vocab, context;
// train.batch_size: the micro-batch) under `variant`, with dropout 0 (the twins have none).
struct GPTShape {
  nn::GPTConfig config;
  int64_t batch = 0, seq = 0;
  std::string source;  // "experiments/lm/gpt-300m.yaml --scale paper"
};
GPTShape gpt_shape_from_file(const std::string& path, const std::string& scale, const nn::Variant& variant);

// Why the PyTorch and JAX twins (tests/parity/torch_models.py's GPT) cannot run this GPT, or ""
// when they can: they have no +LRr or +linear form, and their MLP is 4 d_model wide with exact GELU.
std::string twin_mismatch(const nn::GPTConfig& c, const nn::Variant& v);

// The twins' arguments for the GPT step (bench/torch_step.py gpt ...), before --precision.
std::string twin_args(const nn::GPTConfig& c, int64_t batch, int64_t seq);

}  // namespace qkv::bench
