// A Hugging Face checkpoint folder as qkvlab import reads it: config.json, NUL,
// model.safetensors.index.json, NUL, the shard model-00001-of-00001.safetensors. Read as a GPT-2
// (read_hf_gpt2_config, then gpt_state_from_hf) and as a Llama (read_hf_llama_config, then
// llama_state_from_hf) with read_hf_tensors (lab/infer/hf/: gpt2_*, llama_*, tensors.cpp,
// config_keys.cpp): names, shapes, dtypes, rotary settings.
#include "fuzz/support.h"
#include "lab/infer/hf/gpt2_tensors.h"
#include "lab/infer/hf/llama_tensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto parts = fuzz::split_parts(fuzz::as_text(data, size), 3);
  const auto& dir = fuzz::fresh_scratch();
  fuzz::write_file(dir / "config.json", parts[0]);
  fuzz::write_file(dir / "model.safetensors.index.json", parts[1]);
  fuzz::write_file(dir / "model-00001-of-00001.safetensors", parts[2]);
  fuzz::run_reader([&] {
    const infer::HfGpt2Config config = infer::read_hf_gpt2_config(dir / "config.json");
    const infer::HfTensors tensors = infer::read_hf_tensors(dir);
    infer::gpt_state_from_hf(tensors, config);
  });
  fuzz::run_reader([&] {
    const infer::HfLlamaConfig config = infer::read_hf_llama_config(dir / "config.json");
    const infer::HfTensors tensors = infer::read_hf_tensors(dir);
    infer::llama_state_from_hf(tensors, config);
  });
  return 0;
}
