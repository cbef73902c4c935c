// The language-model family (paper Tables 4, 7, 9): the token data (tokenized once from lm.text
// and cached under <out>/tokens/, or a prepared folder named by lm.tokens), the GPT of the run's
// variant, the step-counted loop with checkpoints, and the result row (validation loss and
// perplexity, parameters, throughput, MFU, KV-cache bytes per token and reduction vs QKV).
#pragma once
#include <filesystem>
#include <string>

#include "lab/experiment/lm_run.h"
#include "lab/experiment/run_dir.h"
#include "train/dist/communicator.h"

namespace qkv::tasks {

// Fails before anything trains when an input file, the tokenizer, lm.tokens or the weights of
// model.init_from are missing (IOError naming the key and the path looked for).
void check_lm_inputs(const experiment::LmConfig& c);

// The weights file model.init_from names: the file itself, or a run folder's newest checkpoint
// (train/loops/lm_checkpoint.h); IOError naming the key and the path when there is none.
std::filesystem::path init_weights_file(const experiment::LmConfig& c);

// The prepared token folder: lm.tokens resolved against data.root, or the lm.text files
// tokenized into <out>/tokens/<experiment name>/ the first time.
std::filesystem::path lm_token_folder(const experiment::LmConfig& c, const std::filesystem::path& out);

// The prepared token folder a trained run `f` read (with `c`, its config, data.root perhaps
// replaced): `token_data` when given, else lm.tokens, else the folder `qkvlab run` tokenized
// lm.text into beside the experiment's folder (prepared again, as a run would, when it is gone).
// IOError naming `command` for a moved run whose folder cannot be found.
std::filesystem::path run_token_folder(const experiment::LmRunFiles& f, const experiment::LmConfig& c,
                                       const std::string& token_data, const std::string& command);

// The data, validation, optimizer and precision protocol of an lm experiment in one line, for
// `qkvlab run` to show (e.g. the official code's at paper scale).
std::string lm_protocol(const experiment::LmConfig& c);

// `resume`: continue from the run's newest checkpoint, when it has one.
experiment::ResultRow run_lm(const experiment::Run& run, const experiment::RunDir& dir,
                             const std::filesystem::path& out, bool resume, dist::Communicator* comm = nullptr);

}  // namespace qkv::tasks
