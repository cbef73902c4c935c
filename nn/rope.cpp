#include "nn/rope.h"

#include <cmath>
#include <numbers>

namespace qkv::nn {

int64_t RopeConfig::rotary_dims(int64_t head_dim) const {
  return int64_t(double(head_dim) * fraction) / 2 * 2;  // int(head_dim * factor), as transformers, made even
}

void RopeConfig::validate(int64_t head_dim) const {
  check<ValueError>(theta > 0, "rope: theta must be positive, got ", theta);
  check<ValueError>(fraction > 0 && fraction <= 1 && rotary_dims(head_dim) >= 2, "rope: the rotated fraction ",
                    fraction, " of head dim ", head_dim, " must be in (0, 1] and turn at least one pair");
  check<ValueError>(scaling == RopeScaling::none || factor >= 1, "rope: a ", rope_scaling_name(scaling),
                    " scaling factor must be at least 1, got ", factor);
  check<ValueError>(scaling != RopeScaling::llama3 ||
                        (low_freq_factor > 0 && high_freq_factor > low_freq_factor && original_context > 0),
                    "rope: llama3 scaling needs 0 < low_freq_factor < high_freq_factor and a positive ",
                    "original context; got ", low_freq_factor, ", ", high_freq_factor, ", ", original_context);
}

const char* rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::none: return "none";
    case RopeScaling::linear: return "linear";
    case RopeScaling::llama3: return "llama3";
  }
  return "none";
}

std::vector<float> rope_inverse_frequencies(const RopeConfig& c, int64_t head_dim) {
  c.validate(head_dim);
  const int64_t R = c.rotary_dims(head_dim);
  std::vector<float> inv(size_t(R / 2));
  // 1.0 / (base ** (arange(0, R, 2).float() / R)), every step in float32.
  for (int64_t i = 0; i < R / 2; ++i) inv[size_t(i)] = 1.0f / std::pow(float(c.theta), float(2 * i) / float(R));
  if (c.scaling == RopeScaling::linear)
    for (float& f : inv) f /= float(c.factor);
  if (c.scaling == RopeScaling::llama3) {  // in float32, step by step as transformers' tensors
    const double old = double(c.original_context);
    const auto low_wavelen = float(old / c.low_freq_factor), high_wavelen = float(old / c.high_freq_factor);
    const auto span = float(c.high_freq_factor - c.low_freq_factor);
    for (float& f : inv) {
      const float wavelen = float(2 * std::numbers::pi) / f;
      if (wavelen > low_wavelen) {
        f = f / float(c.factor);
      } else if (!(wavelen < high_wavelen)) {  // between: interpolated
        const float smooth = (float(old) / wavelen - float(c.low_freq_factor)) / span;
        f = (1.0f - smooth) * f / float(c.factor) + smooth * f;
      }
    }
  }
  return inv;
}

RotaryTables rope_tables(const RopeConfig& c, int64_t head_dim, int64_t positions, const Device& device) {
  const std::vector<float> inv = rope_inverse_frequencies(c, head_dim);
  const auto half = int64_t(inv.size());
  std::vector<float> cos(size_t(positions * half)), sin(cos.size());
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(p) * inv[size_t(i)];  // the float32 product, as transformers forms it
      cos[size_t(p * half + i)] = float(std::cos(double(angle)));
      sin[size_t(p * half + i)] = float(std::sin(double(angle)));
    }
  return {from_vector(cos, {positions, half}, device), from_vector(sin, {positions, half}, device)};
}

}  // namespace qkv::nn
