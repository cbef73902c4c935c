// JSON from files a user hands us (encoder.json, dataset.json, result.json, metrics.jsonl lines,
// safetensors headers), parsed with a bound on nesting: every format the project reads is a few
// levels deep, and a value nested 100,000 levels deep must be an error, not a stack overflow in
// whatever walks the tree next.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace qkv {

constexpr int kMaxJsonDepth = 64;

// Parses `text`; IOError naming `origin` (a file, or "file:line") for malformed JSON or values
// nested deeper than `max_depth`. With `duplicate`, the first key that the outermost object
// repeats goes there ("" when none; the parsed tree keeps the last value).
nlohmann::json parse_json(std::string_view text, const std::string& origin, int max_depth = kMaxJsonDepth,
                          std::string* duplicate = nullptr);

// Reads and parses the regular file at `path` (see input_file.h), refusing files over
// `max_bytes`; `what` names the file's role in errors ("a tokenizer's encoder.json").
nlohmann::json read_json_file(const std::filesystem::path& path, std::string_view what,
                              uint64_t max_bytes = uint64_t(1) << 30, int max_depth = kMaxJsonDepth);

}  // namespace qkv
