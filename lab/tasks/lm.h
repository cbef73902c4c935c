// The language-model family (paper Tables 4, 7, 9): the token data (tokenized once from lm.text
// and cached under <out>/tokens/, or a prepared folder named by lm.tokens), the GPT of the run's
// variant, the step-counted loop with checkpoints, and the result row (validation loss and
// perplexity, parameters, throughput, MFU, KV-cache bytes per token and reduction vs QKV).
#pragma once
#include <filesystem>
#include <string>

#include "lab/experiment/run_dir.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// Fails before anything trains when an input file, the tokenizer or lm.tokens is missing
// (IOError naming the key and the path looked for).
void check_lm_inputs(const experiment::LmConfig& c);

// The prepared token folder: lm.tokens resolved against data.root, or the lm.text files
// tokenized into <out>/tokens/<experiment name>/ the first time.
std::filesystem::path lm_token_folder(const experiment::LmConfig& c, const std::filesystem::path& out);

// The data, validation, optimizer and precision protocol of an lm experiment in one line, for
// `qkvlab run` to show (e.g. the official code's at paper scale).
std::string lm_protocol(const experiment::LmConfig& c);

// `resume`: continue from the run's newest checkpoint, when it has one.
experiment::ResultRow run_lm(const experiment::Run& run, const experiment::RunDir& dir,
                             const std::filesystem::path& out, bool resume, dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
