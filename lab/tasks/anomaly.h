// The anomaly family (paper Table 2, "Anomaly"): sets of n images, n-1 from one class and one
// from another at a random position; a permutation-equivariant set transformer of the run's
// variant scores each element and is trained to pick the odd one out. Elements are features of
// a frozen encoder: a ResNet34 (torchvision weights from a safetensors file, or random init),
// computed once per dataset split and cached under `cache_dir`, or features read from a file.
#pragma once
#include <filesystem>
#include <string>

#include "lab/experiment/run_dir.h"
#include "train/data/image_dataset.h"
#include "train/data/sets.h"

namespace qkv::tasks {

// ResNet34 features of every image of `data` (ImageNet normalization; grayscale repeated to RGB),
// in batches, without a graph.
data::LabelledFeatures resnet_features(const data::ImageDataset& data, const std::string& weights,
                                       const Device& device);

experiment::ResultRow run_anomaly(const experiment::Run& run, const experiment::RunDir& dir,
                                  const std::filesystem::path& cache_dir);

}  // namespace qkv::tasks
