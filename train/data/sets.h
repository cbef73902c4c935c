// Sets for set anomaly detection (paper Table 2, "Anomaly"): sets of n feature vectors, n-1 of
// one class and one of another at a random position; the target is the odd element's position.
#pragma once
#include <optional>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"
#include "train/data/batches.h"

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

// Training sets drawn anew every epoch from the same pool (the set-anomaly template's
// resampling): epoch e's `count` sets come from a generator keyed by (seed, e), so a run repeats
// and every rank of a data-parallel job draws the same sets, of which it serves its shard. The
// sets of an epoch are made when it starts and moved to `device`.
class ResampledSets : public BatchSource {
 public:
  ResampledSets(LabelledFeatures data, std::vector<int64_t> pool, int64_t count, int64_t set_size, int64_t batch_size,
                uint64_t seed, const Device& device, Shard shard = {});
  int64_t batches_per_epoch() const override { return (count_ + batch_size_ - 1) / batch_size_; }
  int64_t examples() const override { return count_; }
  void start_epoch(int64_t epoch) override;
  bool next(Tensor& inputs, Tensor& targets) override;

 private:
  LabelledFeatures data_;
  std::vector<int64_t> pool_;
  int64_t count_, set_size_, batch_size_;
  uint64_t seed_;
  Device device_;
  Shard shard_;
  std::optional<TensorBatches> epoch_;
};

}  // namespace qkv::data
