#include "bench/gpt_step.h"

#include <memory>

#include "autograd/autocast.h"
#include "bench/gpt2_config.h"
#include "bench/torch_runner.h"
#include "lab/experiment/experiment.h"
#include "lab/experiment/models.h"

namespace qkv::bench {

GPTStep::GPTStep(const nn::GPTConfig& c, int64_t B, int64_t T, std::optional<DType> autocast_to, const Device& device)
    : model(c, &gen), autocast(autocast_to) {
  model.to(device);
  // torch.optim.AdamW's default decay, as the twins use.
  opt = std::make_unique<optim::AdamW>(model.named_parameters(), optim::AdamOptions{.lr = 1e-4, .weight_decay = 0.01});
  ids = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64).to(device);
  targets = cast(uniform({B, T}, 0, double(c.vocab), DType::f64, &gen), DType::i64).to(device);
  for (int i = 0; i < 2; ++i) run();
}

void GPTStep::run() {
  Tensor loss;
  {
    AutocastGuard guard(autocast);
    loss = model.loss(ids, targets);
  }
  loss.backward();
  opt->step();
  opt->zero_grad();
}

GPTShape gpt_shape_from_file(const std::string& path, const std::string& scale, const nn::Variant& variant) {
  check_gpt_variant(variant);
  const experiment::Experiment e = experiment::load_experiment(path, scale);
  const auto& lm = e.config.as<experiment::LmConfig>();
  GPTShape s;
  s.config = experiment::gpt_config(lm, variant);
  s.config.dropout = 0.0;
  s.config.validate();
  s.batch = lm.train.batch_size;
  s.seq = lm.model.context;
  s.source = cat(path, scale.empty() ? "" : " --scale " + scale);
  return s;
}

std::string twin_mismatch(const nn::GPTConfig& c, const nn::Variant& v) {
  if (!torch_has_variant(v)) return "their twins have no +LRr or +linear form";
  if (c.attention.rope || c.norm != nn::NormKind::layer || c.mlp != nn::MlpKind::plain)
    return "their twins are the GPT-2 block, not the Llama block";
  if (c.ffn_width() != 4 * c.d_model() || c.activation != nn::Activation::gelu)
    return "their twins' MLP is 4 d_model wide with exact GELU";
  return "";
}

std::string twin_args(const nn::GPTConfig& c, int64_t batch, int64_t seq) {
  return cat("gpt --vocab ", c.vocab, " --context ", c.context, " --layers ", c.layers, " --d-model ", c.d_model(),
             " --heads ", c.attention.heads, " --kv-heads ", c.attention.kv_heads, torch_slots(c.attention.sharing),
             " --batch ", batch, " --length ", seq, " --warmup 2");
}

}  // namespace qkv::bench
