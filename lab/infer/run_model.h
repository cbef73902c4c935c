// A trained language-model run's GPT, ready to use: what generate, analyze and bench decode load.
#pragma once
#include <memory>

#include <string>

#include "lab/experiment/lm_run.h"
#include "nn/models/gpt.h"
#include "train/data/tokens/bpe.h"

namespace qkv::infer {

// The GPT of the run's variant under `config` (the run's, data.root perhaps replaced), with the
// weights of its newest checkpoint, refused when one is not finite (checked on the host, naming
// the file and tensor), then moved to `device` and put in eval mode.
std::unique_ptr<nn::GPT> load_run_model(const experiment::LmRunFiles& run, const experiment::LmConfig& config,
                                        const Device& device);

// The tokenizer the run was trained with: `tokenizer` when given, else config.lm.tokenizer
// (relative to config.data.root).
data::Gpt2Tokenizer load_run_tokenizer(const experiment::LmConfig& config, const std::string& tokenizer = "");

}  // namespace qkv::infer
