// The optimizer the language-model loop tests train with: AdamW (betas 0.9, 0.95) with weight
// decay on the matrices, as GPT training and the experiment files' optim section do.
#pragma once
#include <memory>

#include "nn/module.h"
#include "train/optim/adam.h"

namespace qkv::test {

inline std::unique_ptr<optim::AdamW> lm_adamw(nn::Module& model, double weight_decay = 0.1,
                                              optim::DecayRule decay = optim::DecayRule::matrices) {
  const optim::AdamOptions o{1e-3, 0.9, 0.95, 1e-8, weight_decay};
  return std::make_unique<optim::AdamW>(optim::weight_decay_groups(model.named_parameters(), weight_decay, decay), o);
}

}  // namespace qkv::test
