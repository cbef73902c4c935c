// The vision family (paper Table 2): a ViT of the run's variant trained from scratch on an image
// dataset through the threaded loader, reported by top-1 test accuracy.
#pragma once
#include "lab/experiment/run_dir.h"
#include "nn/models/vit.h"
#include "train/data/image/image_loader.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// What a vision config's ViT sees: images resized to data.image_size and padded (geometry),
// normalised with the training images' channel statistics; `eval` loads them in order without
// augmentation, in batches of train.eval_batch_size (no seed or shard set).
struct VisionInputs {
  experiment::ImageGeometry geometry;
  data::LoaderOptions eval;
};
VisionInputs vision_inputs(const experiment::VisionConfig& c, const data::ImageDataset& train);
// The ViT of a run of `c` over those inputs (the classes and channels of `train`).
nn::ViTConfig vit_of(const experiment::VisionConfig& c, const nn::Variant& variant, const VisionInputs& in,
                     const data::ImageDataset& train);

experiment::ResultRow run_vision(const experiment::Run& run, const experiment::RunDir& dir,
                                 dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
