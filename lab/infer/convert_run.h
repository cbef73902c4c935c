// `qkvlab convert` around the arithmetic of convert.h: a trained language-model run read as the
// source (its resolved config and newest checkpoint), windows of its own training split as the
// calibration tokens, the converted model written as a run folder of its own, and the validation
// loss before and after:
//
//   <out>/config.yaml       the source's config, the variant set to the K=V target and the data
//                           named as lm.tokens (the source's prepared token folder, absolute), so
//                           generate, analyze and model.init_from find everything from here
//   <out>/meta.json         as a run's
//   <out>/checkpoints/      step_N.safetensors (N: the source's step) and a .state.safetensors with
//                           no optimizer state: what open_lm_run reads
//   <out>/convert.json      what it was converted from and how, the fit's errors, the validation
//                           losses; written last, so a folder without it is an interrupted convert
//
// `qkvlab run` refuses to continue or delete such a folder (RunDir::settle_checkpoints).
#pragma once
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "lab/infer/convert.h"

namespace qkv::infer {

struct ConvertRequest {
  std::filesystem::path run;  // the source run folder
  std::filesystem::path out;  // the folder to write: new, or empty
  std::string to;             // the target variant as given ("": the source's K=V form)
  std::string name;           // the converted config's experiment name ("": the source's)
  ConvertMethod method = ConvertMethod::svd;
  int64_t calibration_batches = 16;   // of train.batch_size windows of model.context tokens
  uint64_t calibration_seed = 0;      // the order the windows are drawn in
  bool evaluate = true;               // validation loss of the source and the converted model
  std::string data_root, token_data;  // as generate/analyze take them, when the run's are not valid here
};

struct ConvertedRun {
  std::filesystem::path folder, checkpoint, source_checkpoint, token_folder;
  nn::Variant source_variant, target_variant;
  int64_t source_step = 0, calibration_batches = 0, calibration_tokens = 0;
  std::vector<double> layer_error;  // convert.h
  // The validation loss (mean cross-entropy over the run's train.eval_batches batches of
  // train.eval_batch_size, as its training loop validates); NaN when not evaluated.
  double source_val_loss = NAN, val_loss = NAN;
};

// Errors name the flag or file: a folder that is not a language-model run or has no checkpoint,
// a source that is not QKV/GQA/MQA, a --to that is not its K=V form, an --out that holds files.
ConvertedRun convert_run(const ConvertRequest& r);

// A converted folder's convert.json read back (the study reuses a finished conversion); IOError
// naming the file and the field.
ConvertedRun read_converted(const std::filesystem::path& folder);

}  // namespace qkv::infer
