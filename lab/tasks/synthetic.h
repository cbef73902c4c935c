// The synthetic family (paper Table 1): the sequence task's generated splits, the encoder of the
// run's variant, the epoch loop, and the result row written to the run's folder.
#pragma once
#include "lab/experiment/run_dir.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// Trains the run; returns its result row (also written to dir/result.json, the best weights to
// dir/checkpoint.safetensors and the metrics to dir/metrics.jsonl).
experiment::ResultRow run_synthetic(const experiment::Run& run, const experiment::RunDir& dir,
                                    dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
