// GPT-2's tokenizer files: the input is encoder.json, a NUL byte, then vocab.bpe, loaded by
// Gpt2Tokenizer::load. A tokenizer that loads must then encode and decode a short text back to
// itself (the tokenizer is byte-level: every byte string round-trips).
#include <cstdio>
#include <cstdlib>

#include "fuzz/support.h"
#include "train/data/tokens/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto parts = fuzz::split_parts(fuzz::as_text(data, size), 2);
  const auto& dir = fuzz::scratch();
  fuzz::write_file(dir / "encoder.json", parts[0]);
  fuzz::write_file(dir / "vocab.bpe", parts[1]);
  fuzz::run_reader([&] {
    const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(dir);
    const std::string text = "Hello world, it's the tokenizer's 2nd test\n\xff\xfe<|endoftext|> there";
    const std::vector<int32_t> ids = tok.encode(text);
    if (tok.decode(ids) != text) {
      std::fprintf(stderr, "fuzz: the tokenizer loaded but does not round-trip its text\n");
      std::abort();
    }
  });
  return 0;
}
