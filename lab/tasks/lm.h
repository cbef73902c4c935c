// One language-model run (task.kind lm): the token data (tokenized once from lm.text and cached
// under <out>/tokens/, or a prepared folder named by lm.tokens), the GPT of the run's variant,
// the LM training loop with checkpoints, and the result row (validation loss and perplexity,
// parameters, throughput, MFU, KV-cache bytes per token and reduction vs QKV).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

#include "nn/models/gpt.h"
#include "lab/experiment/run_dir.h"
#include "lab/experiment/sweep.h"

namespace qkv::tasks {

nn::GPTConfig gpt_config(const experiment::Config& c);

// The prepared token folder of an lm experiment: lm.tokens resolved against data.root, or the
// lm.text files tokenized into <out>/tokens/<experiment name>/ the first time (IOError naming
// a missing input or tokenizer file).
std::filesystem::path lm_token_folder(const experiment::Config& c, const std::filesystem::path& out);

// Fails before anything trains when an input file, the tokenizer or lm.tokens is missing
// (IOError naming the key and the path looked for).
void check_lm_inputs(const experiment::Config& c);

// `resume`: continue from the run's newest checkpoint, when it has one.
nlohmann::json run_lm(const experiment::Run& run, const experiment::RunDir& dir, const std::filesystem::path& out,
                      bool resume);

}  // namespace qkv::tasks
