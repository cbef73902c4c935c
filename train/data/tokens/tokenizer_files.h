// The files a GPT-2 tokenizer comes in, read into one form for Gpt2Tokenizer::load: OpenAI's
// release (encoder.json + vocab.bpe), Hugging Face's slow tokenizer (vocab.json + merges.txt:
// the same two formats under other names) or its fast tokenizer (tokenizer.json: model.vocab
// and model.merges, merges written as "left right" strings or as [left, right] pairs).
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
  nlohmann::json vocab;                // {"token": id, ...}, not yet checked
  std::string vocab_source;            // for errors: the file (and key) the vocabulary came from
  std::vector<TokenizerMerge> merges;  // by rank
};

// The first layout `dir` holds, in the order above. IOError naming the folder when it holds none,
// and naming the file and key for a tokenizer.json that is not GPT-2's: a model that is not BPE,
// a normalizer, a pre-tokenizer that is not byte-level or adds a prefix space, BPE dropout, word
// prefixes or suffixes, or added tokens other than "<|endoftext|>".
TokenizerFiles read_tokenizer_files(const std::filesystem::path& dir);

// A token string as JSON writes it (quotes, escapes), for error messages.
std::string quoted(std::string_view token);

}  // namespace qkv::data
