// The image datasets of a vision or anomaly config: where each lives under data.root, and the
// train / validation / test splits (validation held out of the training set, or none).
#pragma once
#include <memory>
#include <string>

#include "lab/experiment/families.h"
#include "train/data/image/image_dataset.h"

namespace qkv::tasks {

struct VisionSplits {
  std::shared_ptr<data::ImageDataset> train, val, test;  // val empty under train.protocol all_last
};

// The folder of data.dataset under data.root (its standard name; Fashion-MNIST also from
// Debian's dataset-fashion-mnist package). IOError listing the places looked at.
std::string dataset_folder(const experiment::ImageData& d);
std::shared_ptr<data::ImageDataset> load_dataset(const experiment::ImageData& d, data::Split split);
// The splits of a vision config, with its train and test limits: data.holdout examples (chosen
// by task.data_seed) validate under train.protocol holdout_best; all_last trains on them all.
VisionSplits load_vision_splits(const experiment::VisionConfig& c);

}  // namespace qkv::tasks
