#include "train/data/loader_batches.h"

namespace qkv::data {

LoaderBatches::LoaderBatches(std::shared_ptr<const ImageDataset> data, LoaderOptions options, Device device)
    : loader_(data, std::move(options)), examples_(data->size()), device_(device) {}

bool LoaderBatches::next(Tensor& inputs, Tensor& targets) {
  ImageBatch b;
  if (!loader_.next(b)) return false;
  inputs = b.images.to(device_);
  targets = b.labels.to(device_);
  return true;
}

}  // namespace qkv::data
