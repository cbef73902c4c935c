// bench_kernels' attention measurements: qkvlab's fused attention op (autograd/ops.h) forward (no
// graph) and forward + backward (dq, dk, dv from a random dO), in ms and GFLOP/s, on each kernel
// path a device has: the default dispatch (on a compute capability 9.0 device with this build's
// sm_90a code: the Hopper wgmma/TMA kernels for bf16/f16 at head dims 64 and 128) and, where that
// differs, the mma.sync kernels every other device runs (QKV_ATTENTION_KERNELS=mma, which the
// dispatch reads at each call). On a GPU each case and path is first checked on a sampled block
// against the CPU in float32: the output, dq, and dk/dv of the last keys (which only the sampled
// queries reach when causal), so a fast wrong kernel never reads as a result.
// FLOPs: forward 4 B H T S D (two GEMMs of B H T S D multiply-adds, 2 FLOPs each), halved when
// causal; the backward counts 2.5 x the forward, so fwd+bwd is 3.5 x. bench/torch_kernels.py holds
// the same cases.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::bench {

struct AttnCase {
  std::string name;
  int64_t B, H, Hk, T, S, D;
  bool causal, kv_shared;
};

// --attention: comma-separated names of cases or groups: "all" (the models' shapes: GPT-2 small,
// the 300M GPT, a ViT, K=V, GQA-4), "flash" (FlashAttention's benchmark shapes: causal, 16k tokens
// a batch, d_model 2048, sequence 2048 and 4096, head dims 64 and 128), or "none"; every batch
// divided by `batch_div` (at least 1). ValueError for an unknown name.
std::vector<AttnCase> select_attention_cases(const std::string& which, int64_t batch_div);

// "B8 H12 Hk12 T1024 S1024 D64 causal k=v": the same string as torch_kernels.py's.
std::string shape_str(const AttnCase& c);

// --attention-kernels: "default" or "default,mma" (ValueError otherwise).
std::vector<std::string> parse_kernel_paths(const std::string& list);

// Times (and on a GPU first checks) every case on every path. The default path's numbers go to
// res["attention.<case>.{fwd,fwdbwd}_{ms,gflops}"], the mma path's to "attention.<case>@mma...";
// shapes[case] is its shape and kernels[case] the default path's kernels ("hopper" or "mma.sync").
void bench_attention(const std::vector<AttnCase>& cases, const std::vector<std::string>& paths, int reps,
                     const Device& dev, DType dt, nlohmann::ordered_json& res, nlohmann::ordered_json& shapes,
                     nlohmann::ordered_json& kernels);

}  // namespace qkv::bench
