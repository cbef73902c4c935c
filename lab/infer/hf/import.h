// `qkvlab import`: a Hugging Face GPT-2 or Llama folder (config.json and model.safetensors, or a
// sharded model.safetensors.index.json; its tokenizer files when present) made into a
// language-model run folder that generate, analyze, convert, eval and bench decode open like a
// trained one. config.json's model_type picks the architecture: gpt2 (gpt2_config.h) or llama
// (llama_config.h).
//
//   <out>/config.yaml      the model of the checkpoint's shape (model.kind gpt or llama; a
//                          Llama's KV heads as its variant, GQA-g or MQA), lm.tokenizer the
//                          copied tokenizer, lm.tokens the --tokens folder or empty (no data of
//                          its own: commands that read data take --token-data)
//   <out>/meta.json        as a run's
//   <out>/tokenizer/       the source's tokenizer files, as they were (absent without them)
//   <out>/checkpoints/     step_0.safetensors in the GPT's names and layout, and its .state file
//   <out>/import.json      where it came from: folder, files with sizes, config.json's values;
//                          written last, so a folder without it is an interrupted import
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "nn/models/gpt.h"

namespace qkv::infer {

struct ImportRequest {
  std::filesystem::path source;  // the Hugging Face folder
  std::filesystem::path out;     // the run folder to write: new, or empty
  std::string name;              // the experiment name ("": the source folder's name)
  std::string tokens;            // a prepared token folder to record as lm.tokens ("": none)
  bool strict = false;           // a config.json key the import does not know is an error, not a warning
};

struct ImportedRun {
  std::filesystem::path folder, checkpoint;
  std::string architecture;  // "GPT-2" or "Llama"
  nn::GPTConfig gpt;
  bool has_tokenizer = false;  // the source came with tokenizer files
  int64_t parameters = 0;
  std::vector<std::string> warnings;  // config.json's unknown keys, named, and what was assumed
};

// Errors name the file and key or tensor (gpt2_config.h, llama_config.h, tensors.h); a
// model_type other than gpt2 and llama, a tokenizer whose vocabulary is larger than the
// model's, non-finite weights, an --out that holds files.
ImportedRun import_hf(const ImportRequest& r);

}  // namespace qkv::infer
