// The five synthetic sequence tasks of the study (PAPER.md, Table 1): a list of n integers
// drawn uniformly from {0..vocab-1} maps to a list of n classes.
//   reverse  flip the list            sort  ascending order
//   sub      vocab-1 - x per element  swap  exchange the two halves (n even)
//   copy     identity
// Example [4,3,9,8,1,7] -> swap -> [8,1,7,4,3,9].
#pragma once
#include <string>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace qkv::data {

enum class SyntheticTask { reverse, sort, sub, swap, copy };
const char* synthetic_task_name(SyntheticTask t);

struct SequenceData {
  Tensor inputs;   // [N, n] int64 in [0, vocab)
  Tensor targets;  // [N, n] int64 in [0, vocab)
  int64_t size() const { return inputs.size(0); }
};

// The target sequence for one input sequence.
std::vector<int64_t> synthetic_target(SyntheticTask task, const std::vector<int64_t>& x, int64_t vocab);

// `count` examples drawn from `gen` (Philox, so the same seed gives the same data anywhere).
SequenceData make_synthetic(SyntheticTask task, int64_t count, int64_t length, int64_t vocab, Generator& gen);

struct SyntheticSplits {
  SequenceData train, val, test;
};
// Train, validation and test sets drawn in that order from one stream seeded by `seed`.
SyntheticSplits make_synthetic_splits(SyntheticTask task, int64_t length, int64_t vocab, int64_t train_size,
                                      int64_t val_size, int64_t test_size, uint64_t seed);

}  // namespace qkv::data
