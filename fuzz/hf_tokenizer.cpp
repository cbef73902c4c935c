// Hugging Face's GPT-2 tokenizer files: an input without a NUL byte is tokenizer.json (the fast
// tokenizer); with one, vocab.json, NUL, merges.txt (the slow one). Loaded by
// Gpt2Tokenizer::load (train/data/tokens/tokenizer_files.cpp); a tokenizer that loads must then
// encode and decode a short text back to itself (the tokenizer is byte-level).
#include <cstdio>
#include <cstdlib>

#include "fuzz/support.h"
#include "train/data/tokens/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const std::string_view input = fuzz::as_text(data, size);
  const auto& dir = fuzz::fresh_scratch();
  if (input.find('\0') == std::string_view::npos) {
    fuzz::write_file(dir / "tokenizer.json", input);
  } else {
    const auto parts = fuzz::split_parts(input, 2);
    fuzz::write_file(dir / "vocab.json", parts[0]);
    fuzz::write_file(dir / "merges.txt", parts[1]);
  }
  fuzz::run_reader([&] {
    const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(dir);
    const std::string text = "Hello world, it's the tokenizer's 2nd test\n\xff\xfe<|endoftext|> there";
    if (tok.decode(tok.encode(text)) != text) {
      std::fprintf(stderr, "fuzz: the tokenizer loaded but does not round-trip its text\n");
      std::abort();
    }
  });
  return 0;
}
