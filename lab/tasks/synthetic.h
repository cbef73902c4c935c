// One run of a synthetic-task experiment (paper Table 1) from its resolved config: data, the
// encoder with the run's attention variant, optimizer and schedule, training with the shared
// trainer, and the result row written to the run's folder.
#pragma once
#include <nlohmann/json.hpp>

#include "nn/models/encoder.h"
#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"

namespace qkv::tasks {

// The encoder a config describes (its variant applied).
nn::EncoderConfig encoder_config(const experiment::Config& c);

// Trains the run and returns its result row (also written to dir/result.json, with the best
// weights in dir/checkpoint.safetensors and the metrics in dir/metrics.jsonl).
nlohmann::json run_synthetic(const experiment::Run& run, const experiment::RunDir& dir);

}  // namespace qkv::tasks
