// bench_decode's measurement: variants' models decoding in turns, one step of each at a time, so
// the machine's noise hits them alike, with the peers' twins (bench/torch_decode.py) decoding a
// step after qkvlab's in every turn. On a GPU each step ends when its tokens are on the host (as a
// sampler's would), and with `graph` the steps replay a CUDA graph (lab/infer/static_decoder.h).
#pragma once
#include <memory>
#include <vector>

#include "bench/torch_session.h"
#include "nn/models/gpt.h"

namespace qkv::bench {

struct DecodeCase {
  int64_t batch, prompt;
};

// How a section decodes: the cache's storage, and eager steps or a replayed CUDA graph.
struct DecodeSection {
  DType cache = DType::f32;
  bool graph = false;
};

// A peer decoding one of the variants, and its step times (ms; empty once it failed).
struct PeerDecoder {
  std::unique_ptr<TorchSession> twin;
  size_t variant = 0;
  std::vector<double> ms;
  bool failed = false;
};

struct TurnTimes {
  std::vector<double> median_s;              // each variant's median seconds per step
  std::vector<std::vector<double>> step_ms;  // each variant's steps, ms
  std::vector<double> speedup;               // median over turns of the first variant's step over this one's
  bool graphed = false;                      // the steps replayed CUDA graphs
};

// Prefills a cache per model (the same random prompt of `k.prompt` tokens, a cache of prompt +
// new_tokens positions) and decodes new_tokens steps in turns (with `graph`, the first step
// captures the graph and is not timed); each peer (prefilled when its twin started) decodes one
// step after qkvlab's in every turn.
TurnTimes decode_in_turns(const std::vector<const nn::GPT*>& models, const DecodeCase& k, int64_t new_tokens,
                          const DecodeSection& section, std::vector<PeerDecoder>& peers);

// A copy's bandwidth on `device`, bytes read plus bytes written per second, best of 5 over buffers
// of `mib` MiB (a parallel loop on the CPU, a device-to-device copy on a GPU).
double copy_bandwidth(const Device& device, int64_t mib = 256);

}  // namespace qkv::bench
