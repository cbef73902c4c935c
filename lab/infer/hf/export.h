// `qkvlab export RUN --format hf-gpt2|hf-llama --out DIR`: a language-model run of any variant
// written as a folder transformers' GPT2LMHeadModel (a GPT-2 block) or LlamaForCausalLM (the
// Llama block) loads with from_pretrained and that computes the run's logits (gpt2_tensors.h and
// llama_tensors.h say how the variants are written out):
//
//   <out>/model.safetensors    transformers' names and layout, float32
//   <out>/config.json          GPT2Config (gpt2_config.h) or LlamaConfig (llama_config.h)
//   <out>/vocab.json, merges.txt, tokenizer.json, tokenizer_config.json
//                              the run's tokenizer (OpenAI's encoder.json and vocab.bpe are the
//                              same formats under Hugging Face's names; a tokenizer_config.json
//                              it came with is kept), when it can be found
//   <out>/qkvlab_export.json   the run, variant and checkpoint it came from
// config.json is written last: a folder without it is an interrupted export.
#pragma once
#include <filesystem>
#include <string>

#include "nn/variant.h"

namespace qkv::infer {

enum class ExportFormat { hf_gpt2, hf_llama };

struct ExportRequest {
  ExportFormat format = ExportFormat::hf_gpt2;
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

// ValueError naming the variant for what the format cannot express ((+) 2D scores, linear
// attention; a Llama-style model as GPT-2, a GPT-2-style one as Llama); IOError for a folder that
// is not a language-model run or an --out that holds files.
ExportedModel export_hf(const ExportRequest& r);

}  // namespace qkv::infer
