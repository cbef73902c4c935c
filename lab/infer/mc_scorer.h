// Multiple-choice scoring by log-likelihood, as lm-evaluation-harness scores ARC, HellaSwag,
// PIQA and WinoGrande: each choice's continuation is scored by sum log p(continuation | prompt)
// under the model, the prompt being k solved examples (few-shot, each followed by a blank line)
// and the question's context, after the end-of-text token every training document starts with.
// acc takes the choice of the highest log-likelihood, acc_norm the highest per byte of its
// continuation. Whitespace ending a context moves to the continuation; a request longer than the
// model's context keeps its last tokens.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/models/gpt.h"
#include "train/data/mc_tasks.h"
#include "train/data/tokens/bpe.h"

namespace qkv::infer {

using data::McItem;
using data::McTask;

struct McScoreOptions {
  int64_t shots = 5;     // solved examples before each question
  uint64_t seed = 1234;  // which examples (lm-evaluation-harness's default seed)
  int64_t batch = 8;     // sequences per forward pass
  int64_t limit = 0;     // score only the first N questions (0: all)
};

struct McScore {
  McTask task{};
  int64_t items = 0, shots = 0;
  double acc = 0, acc_norm = 0;
};

// The few-shot prompt of question `index`: `shots` solved examples of `pool` in an order drawn
// from (seed, index), never the question itself when `pool_is_items` (the pool is the scored
// list); "" for 0 shots.
std::string fewshot_prefix(const std::vector<McItem>& pool, bool pool_is_items, int64_t index, int64_t shots,
                           uint64_t seed);

// sum log p(continuation | context) of each (context, continuation) request, in order.
std::vector<double> loglikelihoods(const nn::GPT& model, const data::Gpt2Tokenizer& tokenizer,
                                   const std::vector<std::pair<std::string, std::string>>& requests, int64_t batch);

// Scores `items`, the shots drawn from `pool` (`pool_is_items`: the items themselves).
McScore score_mc(const nn::GPT& model, const data::Gpt2Tokenizer& tokenizer, McTask task,
                 const std::vector<McItem>& items, const std::vector<McItem>& pool, bool pool_is_items,
                 const McScoreOptions& o);

}  // namespace qkv::infer
