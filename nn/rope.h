// Rotary position embedding (RoPE) as Llama-style models define it: the first R = fraction x
// head_dim dims of every query and key head turn pair by pair (element i with i + R/2, Hugging
// Face's rotate-half layout) by the angle p * inv_freq[i] at position p, with
//   inv_freq[i] = 1 / theta^(2i / R)
// and transformers' frequency scalings of long-context checkpoints: `linear` divides every
// frequency by `factor`; `llama3` divides the low frequencies (wavelength above
// original_context / low_freq_factor) by `factor`, keeps the high ones (wavelength below
// original_context / high_freq_factor) and interpolates between.
//
// The tables are computed in float32 as transformers computes them (inverse frequencies, then
// the float32 product of position and frequency), so a checkpoint's logits match its own.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/ops.h"

namespace qkv::nn {

enum class RopeScaling : uint8_t { none, linear, llama3 };

struct RopeConfig {
  double theta = 10000;   // rope_theta
  double fraction = 1.0;  // partial_rotary_factor: the rotated share of each head
  RopeScaling scaling = RopeScaling::none;
  double factor = 1;                                 // linear and llama3
  double low_freq_factor = 1, high_freq_factor = 4;  // llama3
  int64_t original_context = 8192;                   // llama3: original_max_position_embeddings
  bool operator==(const RopeConfig&) const = default;

  int64_t rotary_dims(int64_t head_dim) const;  // R: even, at most head_dim
  void validate(int64_t head_dim) const;        // ValueError naming the field
};

const char* rope_scaling_name(RopeScaling s);  // "none", "linear", "llama3"

// inv_freq[i], i < R/2, in float32 as transformers computes it.
std::vector<float> rope_inverse_frequencies(const RopeConfig& c, int64_t head_dim);

// cos and sin [positions, R/2] (float32) on `device`: the angles of positions 0 .. positions-1.
RotaryTables rope_tables(const RopeConfig& c, int64_t head_dim, int64_t positions, const Device& device);

}  // namespace qkv::nn
