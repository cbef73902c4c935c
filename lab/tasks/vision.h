// One run of a vision experiment (paper Table 2): a ViT trained from scratch on an image
// dataset through the image loader, reported by top-1 test accuracy.
#pragma once
#include <nlohmann/json.hpp>

#include "nn/models/vit.h"
#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"

namespace qkv::tasks {

// The ViT of a config for images of the given geometry and class count.
nn::ViTConfig vit_config(const experiment::Config& c, int64_t height, int64_t width, int64_t channels, int64_t classes);

nlohmann::json run_vision(const experiment::Run& run, const experiment::RunDir& dir);

}  // namespace qkv::tasks
