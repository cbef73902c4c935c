// GPT-2's byte-level BPE tokenizer, read from the released encoder.json and vocab.bpe, or from
// Hugging Face's files for it; and the same tokenizer with another regex and special tokens, as
// Llama 3's tokenizer.json has it (tokenizer_files.h).
//
// Text is cut into pre-tokens by GPT-2's regex (contractions, letter runs, number runs,
// punctuation runs, whitespace) or the file's, run through PCRE2 in UTF + UCP mode, JIT-compiled
// when the library supports it. Each pre-token's bytes are merged by rank as in OpenAI's encoder.py.
// The tokenizer works on bytes, not characters: any byte string encodes and decodes back to
// itself. Bytes that are not valid UTF-8 never join a regex match; each run of them is a
// pre-token of its own (made of byte tokens and whatever merges apply to them).
//
// Python's `regex` module (the reference) takes \s as Unicode White_Space, which includes
// U+0085 (NEL); PCRE2's \s under UCP does not, so the pattern here adds \x{85} explicitly.
//
// Thread safety: a loaded tokenizer is immutable apart from a cache of encoded words guarded by
// sharded mutexes; encode, encode_ordinary and decode may be called from several threads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::data {

class Gpt2Tokenizer {
 public:
  // Reads the tokenizer in `dir`: encoder.json + vocab.bpe, vocab.json + merges.txt or
  // tokenizer.json (tokenizer_files.h). Throws IOError naming the file (and the line or key) when
  // one is missing or malformed: not a JSON object of token -> id, ids not 0..N-1 each once, a
  // character outside GPT-2's byte alphabet, a byte with no token of its own, no "<|endoftext|>"
  // entry, a merge that is not two tokens, or a merge whose parts or result the vocabulary does
  // not contain.
  static Gpt2Tokenizer load(const std::filesystem::path& dir);

  // A special token spelled out in the text ("<|endoftext|>" for GPT-2) becomes its id;
  // everything else as encode_ordinary.
  std::vector<int32_t> encode(std::string_view text) const;
  // The special token's spelling is encoded as ordinary text.
  std::vector<int32_t> encode_ordinary(std::string_view text) const;
  // Appends the ids of `text` (ordinary) to `out`; the allocation-friendly form of the above.
  void encode_ordinary_into(std::string_view text, std::vector<int32_t>& out) const;
  // The bytes of the tokens, concatenated. Throws ValueError naming an id outside [0, vocab_size).
  std::string decode(std::span<const int32_t> ids) const;

  int32_t eot() const;         // the id of the end-of-text token ("<|endoftext|>": 50256 for GPT-2)
  int64_t vocab_size() const;  // 50257 for GPT-2
  // The bytes of one token (ValueError for an id out of range).
  const std::string& token_bytes(int32_t id) const;

  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer();

 private:
  struct Impl;
  explicit Gpt2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// GPT-2's bytes_to_unicode: the printable character standing for each byte in encoder.json and
// vocab.bpe (printable Latin-1 bytes stand for themselves, the rest map to U+0100 and up).
char32_t gpt2_byte_to_unicode(uint8_t byte);

}  // namespace qkv::data
