// `qkvlab export RUN --format hf-gpt2 --out DIR`: a language-model run of any variant written as
// a folder transformers' GPT2LMHeadModel.from_pretrained loads and that computes the run's
// logits (hf_gpt2_tensors.h says how the variants are written out):
//
//   <out>/model.safetensors    transformers' names and Conv1D layout, float32
//   <out>/config.json          GPT2Config (hf_gpt2_config.h)
//   <out>/vocab.json, merges.txt, tokenizer_config.json
//                              the run's tokenizer (OpenAI's encoder.json and vocab.bpe are the
//                              same formats under Hugging Face's names), when it can be found
//   <out>/qkvlab_export.json   the run, variant and checkpoint it came from
// config.json is written last: a folder without it is an interrupted export.
#pragma once
#include <filesystem>
#include <string>

#include "nn/variant.h"

namespace qkv::infer {

struct ExportRequest {
  std::filesystem::path run;  // a language-model run folder (trained, converted or imported)
  std::filesystem::path out;  // the folder to write: new, or empty
  std::string tokenizer;      // the tokenizer folder when the run's is not valid here
  std::string data_root;      // data.root, when the run's is not valid here
};

struct ExportedModel {
  std::filesystem::path folder, checkpoint;
  nn::Variant variant;
  bool has_tokenizer = false;
};

// ValueError naming the variant for what GPT-2 cannot express ((+) 2D scores, linear attention);
// IOError for a folder that is not a language-model run or an --out that holds files.
ExportedModel export_hf_gpt2(const ExportRequest& r);

}  // namespace qkv::infer
