// The vision family (paper Table 2): a ViT of the run's variant trained from scratch on an image
// dataset through the threaded loader, reported by top-1 test accuracy.
#pragma once
#include "lab/experiment/run_dir.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

experiment::ResultRow run_vision(const experiment::Run& run, const experiment::RunDir& dir,
                                 dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
