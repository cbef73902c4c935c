#include "lab/infer/run_model.h"

#include "lab/experiment/models.h"
#include "lab/infer/generate.h"

namespace qkv::infer {

std::unique_ptr<nn::GPT> load_run_model(const experiment::LmRunFiles& run, const experiment::LmConfig& config,
                                        const Device& device) {
  Generator gen(0);
  auto model = std::make_unique<nn::GPT>(experiment::gpt_config(config, run.run.variant), &gen);
  model->load(run.checkpoint.string());
  check_finite_weights(*model, run.checkpoint.string());  // on the host, before the move
  model->to(device);
  model->eval();
  return model;
}

data::Gpt2Tokenizer load_run_tokenizer(const experiment::LmConfig& config, const std::string& tokenizer) {
  std::filesystem::path dir =
      tokenizer.empty() ? std::filesystem::path(config.lm.tokenizer) : std::filesystem::path(tokenizer);
  if (tokenizer.empty() && dir.is_relative()) dir = std::filesystem::path(config.data.root) / dir;
  return data::Gpt2Tokenizer::load(dir);
}

}  // namespace qkv::infer
