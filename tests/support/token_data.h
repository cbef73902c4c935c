// A token dataset folder written by hand for tests: each split's shards and a dataset.json that
// lists them, as `qkvlab data prepare` writes it, without a tokenizer.
#pragma once
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/token_shard.h"

namespace qkv::test {

inline void write_dataset(const std::filesystem::path& dir,
                          const std::map<std::string, std::vector<std::vector<int32_t>>>& splits, int64_t vocab,
                          int32_t eot) {
  std::filesystem::create_directories(dir);
  nlohmann::json js = nlohmann::json::object();
  for (const auto& [name, shards] : splits) {
    nlohmann::json list = nlohmann::json::array();
    int64_t total = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::filesystem::path p = data::token_shard_path(dir / name, int64_t(i));
      data::write_token_shard(p, shards[i], vocab);
      list.push_back({{"file", p.filename().string()}, {"tokens", shards[i].size()}});
      total += int64_t(shards[i].size());
    }
    js[name] = {{"tokens", total}, {"shards", list}};
  }
  const nlohmann::json info = {{"tokenizer", {{"vocab_size", vocab}, {"eot", eot}}}, {"splits", js}};
  write_file(dir / "dataset.json", info.dump(2));
}

// `root`/tokens: a Markov chain over 48 of `vocab` (>= 48) tokens, 5000 for training and 1000
// for validation; each token is followed by (7 t + 3) mod 48 three times in four, else by a
// uniform draw, so a small language model has something to learn. EOT is vocab - 1.
inline std::filesystem::path markov_token_dataset(const std::filesystem::path& root, int64_t vocab) {
  Generator gen(5);
  const std::vector<double> u = rand({2 * 6000}, DType::f64, &gen).to_vector<double>();
  std::vector<int32_t> tokens{0};
  for (size_t i = 1; i < 6000; ++i)
    tokens.push_back(u[2 * i] < 0.75 ? (7 * tokens.back() + 3) % 48 : int32_t(u[2 * i + 1] * 48));
  const std::filesystem::path dir = root / "tokens";
  write_dataset(dir,
                {{"train", {{tokens.begin(), tokens.begin() + 5000}}},
                 {"val", {{tokens.begin() + 5000, tokens.end()}}}},
                vocab, int32_t(vocab - 1));
  return dir;
}

// Overrides that shrink a shipped language-model experiment file to a GPT that trains in a
// fraction of a second on markov_token_dataset(root, 64)'s tokens: `steps` steps, validated once
// at the end.
inline std::vector<std::string> tiny_lm_overrides(const std::filesystem::path& tokens, int steps) {
  return {"lm.text=[]",
          "lm.tokens=" + tokens.string(),
          "model.vocab=64",
          "model.context=8",
          "model.d_model=16",
          "model.heads=4",
          "model.layers=2",
          "model.dropout=0",
          "train.steps=" + std::to_string(steps),
          "train.batch_size=4",
          "train.eval_every=" + std::to_string(steps),
          "train.eval_batches=2",
          "train.eval_batch_size=4",
          "train.peak_tflops=1",
          "train.log_every=2",
          "schedule.warmup_steps=1"};
}

}  // namespace qkv::test
