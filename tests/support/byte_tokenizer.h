// A byte-level GPT-2 tokenizer folder written by tests: the 256 bytes (token = byte value) and
// end-of-text (256), no merges, so `data prepare` runs without the data folder.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/test_support.h"
#include "train/data/tokens/bpe.h"

namespace qkv::test {

inline constexpr int32_t kByteEot = 256;

inline std::filesystem::path byte_tokenizer(const std::filesystem::path& dir) {
  auto utf8 = [](char32_t c) {
    if (c < 0x80) return std::string(1, char(c));
    return std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};  // GPT-2's byte alphabet is below U+0800
  };
  std::filesystem::create_directories(dir);
  nlohmann::json enc = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) enc[utf8(data::gpt2_byte_to_unicode(uint8_t(b)))] = b;
  enc["<|endoftext|>"] = kByteEot;
  write_file(dir / "encoder.json", enc.dump());
  write_file(dir / "vocab.bpe", "#version: 0.2\n");
  return dir;
}

}  // namespace qkv::test
