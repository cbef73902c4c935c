// A language-model run folder written directly (config.yaml, meta.json, checkpoints/step_0): a GPT
// of any variant with random weights, biases and LayerNorms included (the GPT's own init has
// zero biases and unit LayerNorms, which would hide a misplaced one), for tests of what reads
// run folders (export, the parity dump). No data: lm.text and lm.tokens are empty.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "io/atomic_file.h"
#include "lab/experiment/config.h"
#include "lab/experiment/lm_run.h"
#include "lab/experiment/models.h"
#include "nn/init.h"
#include "train/loops/lm_checkpoint.h"

namespace qkv::test {

struct LmRunShape {
  std::string kind = "gpt";  // or llama (the activation is then its SwiGLU's)
  std::string activation = "gelu_tanh";
  int vocab = 97, context = 16, d_model = 32, layers = 2, heads = 4;
  double ffn_mult = 4;
  std::string extra;  // more model keys, "key: value, ..." (a llama's head_dim, rope_*, biases)
};

// Writes the run of `variant` to `folder` and returns its model (eval mode, on the CPU).
inline std::unique_ptr<nn::GPT> write_lm_run(const std::filesystem::path& folder, const std::string& variant,
                                             uint64_t seed = 1, const LmRunShape& s = {}) {
  const std::string yaml = "name: exported\ntask: {kind: lm}\nlm: {tokens: \"\"}\nmodel: {kind: " + s.kind +
                           (s.kind == "gpt" ? ", activation: " + s.activation : "") +
                           (s.extra.empty() ? "" : ", " + s.extra) + ", vocab: " + std::to_string(s.vocab) +
                           ", context: " + std::to_string(s.context) + ", d_model: " + std::to_string(s.d_model) +
                           ", layers: " + std::to_string(s.layers) + ", heads: " + std::to_string(s.heads) +
                           ", ffn_mult: " + std::to_string(s.ffn_mult) + ", dropout: 0}\nsweep: {variants: [\"" +
                           variant + "\"], seeds: [0]}\n";
  const experiment::Config config = experiment::config_from_yaml(yaml, "write_lm_run");
  const auto& c = config.as<experiment::LmConfig>();
  Generator gen(seed);
  auto model = std::make_unique<nn::GPT>(experiment::gpt_config(c, c.sweep.variants.at(0)), &gen);
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters()) {
      const bool norm = name.find(".ln") != std::string::npos || name.rfind("ln_f", 0) == 0;
      const Tensor noise = nn::init_normal(p.shape(), norm ? 0.2 : 0.1, kCPU, &gen);
      p.copy_(norm && name.ends_with(".weight") ? noise + 1.0 : noise);
    }
  }
  model->eval();
  std::filesystem::create_directories(folder);
  loops::save_lm_checkpoint(*model, {}, loops::LmLoopState{}, folder, 1);
  const std::string text = experiment::to_yaml(config);
  write_file_atomically((folder / "config.yaml").string(), [&](std::ostream& os) { os << text; });
  return model;
}

}  // namespace qkv::test
