// GPT-2's tokenizer from the test data folder (<data>/gpt2-tokenizer), loaded once per process;
// the test fails with the folder it looked in when the files are missing.
#pragma once
#include <doctest/doctest.h>

#include "tests/support/test_support.h"
#include "train/data/tokens/bpe.h"

namespace qkv::test {

inline const data::Gpt2Tokenizer& gpt2() {
  static const data::Gpt2Tokenizer tok = [] {
    const std::filesystem::path dir = data_dir() / "gpt2-tokenizer";
    INFO("GPT-2 tokenizer files expected in ", dir.string(), " (set QKV_DATA to the data folder)");
    REQUIRE(std::filesystem::exists(dir / "encoder.json"));
    return data::Gpt2Tokenizer::load(dir);
  }();
  return tok;
}

}  // namespace qkv::test
