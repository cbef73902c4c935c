// The batch interface the training loops read from: a BatchSource serves (inputs, targets)
// batches epoch by epoch. TensorBatches serves a LabelledData held in memory; LoaderBatches
// (loader_batches.h) serves images from the threaded loader.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"
#include "train/data/shard.h"

namespace qkv::data {

// A labelled dataset held as two tensors with the example index first.
struct LabelledData {
  Tensor inputs;   // [N, ...]
  Tensor targets;  // [N] or [N, T], int64
  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

// Where batches come from. Batches arrive on the model's device.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t batches_per_epoch() const = 0;
  virtual int64_t examples() const = 0;
  virtual void start_epoch(int64_t epoch) = 0;             // 0-based
  virtual bool next(Tensor& inputs, Tensor& targets) = 0;  // false at the end of the epoch
  virtual double wait_seconds() const { return 0; }        // time spent waiting for data
};

// Batches of a LabelledData, in order or in epoch_order(n, seed, epoch) (shuffle.h); with a
// shard, this rank's rows of each batch (shard.h; a rank's share of a short last batch may be
// empty: next() then serves zero rows).
class TensorBatches : public BatchSource {
 public:
  TensorBatches(LabelledData data, int64_t batch_size, bool shuffle, uint64_t seed = 0, Shard shard = {});
  int64_t batches_per_epoch() const override;
  int64_t examples() const override { return data_.size(); }
  void start_epoch(int64_t epoch) override;
  bool next(Tensor& inputs, Tensor& targets) override;

 private:
  LabelledData data_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  Shard shard_;
  Tensor order_;
  int64_t cursor_ = 0;
};

}  // namespace qkv::data
