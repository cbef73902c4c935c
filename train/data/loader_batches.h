// The image loader as a trainer BatchSource: batches from worker threads, moved to the device.
#pragma once
#include "train/data/batches.h"
#include "train/data/image/image_loader.h"

namespace qkv::data {

class LoaderBatches : public BatchSource {
 public:
  LoaderBatches(std::shared_ptr<const ImageDataset> data, LoaderOptions options, Device device);
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  int64_t examples() const override { return examples_; }
  void start_epoch(int64_t epoch) override { loader_.start_epoch(epoch); }
  bool next(Tensor& inputs, Tensor& targets) override;
  double wait_seconds() const override { return loader_.wait_seconds(); }

 private:
  ImageLoader loader_;
  int64_t examples_;
  Device device_;
};

}  // namespace qkv::data
