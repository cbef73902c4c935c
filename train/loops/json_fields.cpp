#include "train/loops/json_fields.h"

#include <cmath>

namespace qkv::loops {

JsonFields::JsonFields(const nlohmann::json& object, std::string where) : j_(object), where_(std::move(where)) {
  check<IOError>(j_.is_object(), where_, ": expected a JSON object, got ", j_.type_name());
}

void JsonFields::fail(const char* key, const std::string& what) const {
  throw IOError(cat(where_, ": field '", key, "' ", what));
}

const nlohmann::json& JsonFields::field(const char* key, const char* expected) const {
  auto it = j_.find(key);
  if (it == j_.end()) fail(key, cat("is missing (expected ", expected, ")"));
  return *it;
}

double JsonFields::number(const char* key) const {
  const nlohmann::json& v = field(key, "a number");
  if (v.is_null()) return NAN;  // nlohmann writes NaN and the infinities as null
  if (!v.is_number()) fail(key, cat("is ", v.dump(), ", expected a number"));
  return v.get<double>();
}

int64_t JsonFields::integer(const char* key) const {
  const nlohmann::json& v = field(key, "an integer");
  if (!v.is_number_integer()) fail(key, cat("is ", v.dump(), ", expected an integer"));
  return v.get<int64_t>();
}

std::string JsonFields::text(const char* key) const {
  const nlohmann::json& v = field(key, "a string");
  if (!v.is_string()) fail(key, cat("is ", v.dump(), ", expected a string"));
  return v.get<std::string>();
}

const nlohmann::json& JsonFields::array(const char* key) const {
  const nlohmann::json& v = field(key, "a list");
  if (!v.is_array()) fail(key, cat("is a ", v.type_name(), ", expected a list"));
  return v;
}

const nlohmann::json& JsonFields::object(const char* key) const {
  const nlohmann::json& v = field(key, "an object");
  if (!v.is_object()) fail(key, cat("is a ", v.type_name(), ", expected an object"));
  return v;
}

std::optional<double> JsonFields::optional_number(const char* key) const {
  if (!j_.contains(key)) return std::nullopt;
  return number(key);
}

std::optional<int64_t> JsonFields::optional_integer(const char* key) const {
  if (!j_.contains(key)) return std::nullopt;
  return integer(key);
}

}  // namespace qkv::loops
