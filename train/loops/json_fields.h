// Strict reading of a JSON object's fields, for the records the loops write (metrics.jsonl) and
// the result rows built on them: a missing field or one of the wrong type is an IOError naming
// the file (and line) and the field, never a default.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tensor/error.h"

namespace qkv::loops {

class JsonFields {
 public:
  // `where` names the object in messages: "runs/x/result.json" or "metrics.jsonl:12".
  JsonFields(const nlohmann::json& object, std::string where);

  double number(const char* key) const;  // null reads as NaN (how a non-finite number is written)
  int64_t integer(const char* key) const;
  std::string text(const char* key) const;
  const nlohmann::json& array(const char* key) const;
  const nlohmann::json& object(const char* key) const;
  // The same for fields that may be absent.
  std::optional<double> optional_number(const char* key) const;
  std::optional<int64_t> optional_integer(const char* key) const;
  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& field(const char* key, const char* expected) const;
  [[noreturn]] void fail(const char* key, const std::string& what) const;
  const nlohmann::json& j_;
  std::string where_;
};

}  // namespace qkv::loops
