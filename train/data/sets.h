// Sets for set anomaly detection (paper Table 2, "Anomaly"): sets of n feature vectors, n-1 of
// one class and one of another at a random position; the target is the odd element's position.
#pragma once
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace qkv::data {

struct LabelledFeatures {
  Tensor features;  // [N, F] float32
  Tensor labels;    // [N] int64
};

struct SetData {
  Tensor features;  // [S, n, F]
  Tensor targets;   // [S] int64: the position of the odd element
};

// `count` sets of `set_size` drawn from the examples `pool` of `data`: a majority class with at
// least set_size-1 examples in the pool, another class, a random position for the odd one.
SetData make_sets(const LabelledFeatures& data, const std::vector<int64_t>& pool, int64_t count, int64_t set_size,
                  Generator& gen);

}  // namespace qkv::data
