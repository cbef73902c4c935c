// A token dataset folder written by hand for tests: each split's shards and a dataset.json that
// lists them, as `qkvlab data prepare` writes it, without a tokenizer.
#pragma once
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/test_support.h"
#include "train/data/token_shard.h"

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

}  // namespace qkv::test
