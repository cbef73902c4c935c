// Reading a Hugging Face config.json: typed getters whose errors name the file and the key, and
// the keys every model's config may hold without changing its logits (names and ids, storage
// dtype, generation defaults, classification heads' labels). A key neither read nor ignored is
// a warning that names it and says what the import assumed, or under --strict an error.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::infer {

struct HfConfigReader {
  const nlohmann::json& j;
  std::string file;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  int64_t positive(const std::string& key, const nlohmann::json* fallback = nullptr) const;
  bool flag(const std::string& key, bool fallback) const;
  double number(const std::string& key, double fallback) const;
  // IOError unless the flag (fallback when absent) is `value`; `why` says what is supported.
  void require(const std::string& key, bool value, bool fallback, const char* why) const;
};

// Keys of any model's config.json that cannot change the logits.
bool ignored_by_every_import(std::string_view key);

// One warning per key of `j` that is neither in `read` nor ignored (by every import or in
// `ignored`), naming the file and the key; with `strict`, an IOError for the first instead.
// `model` names the import ("GPT-2", "Llama").
std::vector<std::string> unknown_key_warnings(const HfConfigReader& r, const std::set<std::string, std::less<>>& read,
                                              const std::set<std::string, std::less<>>& ignored,
                                              const std::string& model, bool strict);

}  // namespace qkv::infer
