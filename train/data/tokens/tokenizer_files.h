// The files a byte-level BPE tokenizer comes in, read into one form for Gpt2Tokenizer::load:
// OpenAI's GPT-2 release (encoder.json + vocab.bpe), Hugging Face's slow tokenizer (vocab.json +
// merges.txt: the same two formats under other names) or its fast tokenizer (tokenizer.json:
// model.vocab and model.merges, merges written as "left right" strings or as [left, right]
// pairs). A tokenizer.json may cut the text with GPT-2's regex (a ByteLevel pre-tokenizer) or
// with its own (Llama 3's layout: a Split pre-tokenizer with the regex, isolated
// matches, then ByteLevel without a regex of its own), and have special tokens of its own.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qkv::data {

struct TokenizerMerge {
  std::string left, right;  // token strings in GPT-2's byte alphabet
  std::string where;        // for errors: "merges.txt:12" or "tokenizer.json: model.merges[10]"
};

struct TokenizerFiles {
  nlohmann::json vocab;                // {"token": id, ...}, not yet checked; special tokens included
  std::string vocab_source;            // for errors: the file (and key) the vocabulary came from
  std::vector<TokenizerMerge> merges;  // by rank
  std::string pattern;                 // the pre-tokenizer's regex as written; empty: GPT-2's
  std::string pattern_source;          // for errors: where it was read
  std::vector<std::string> specials;   // special tokens: spelled out in text, each is its token
  std::string end_of_text;             // the special token that ends a document
  bool ignore_merges = false;          // a word that is a token is that token, unmerged (Llama 3)
};

// The first layout `dir` holds, in the order above. IOError naming the folder when it holds none,
// and naming the file and key for a tokenizer.json this reader cannot follow: a model that is
// not BPE, a normalizer, a pre-tokenizer other than the two above or one that adds a prefix
// space, BPE dropout, word prefixes or suffixes, added tokens that are not special, or no
// end-of-text token ("<|endoftext|>", else tokenizer_config.json's eos_token).
TokenizerFiles read_tokenizer_files(const std::filesystem::path& dir);

// A token string as JSON writes it (quotes, escapes), for error messages.
std::string quoted(std::string_view token);

}  // namespace qkv::data
