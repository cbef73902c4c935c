#include "train/data/tokens/tokenizer_files.h"

#include <fstream>

#include "io/input_file.h"
#include "io/json_read.h"
#include "tensor/error.h"

namespace qkv::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A merges file (vocab.bpe, merges.txt): an optional "#version" line, then "left right" per line.
std::vector<TokenizerMerge> read_merge_lines(const fs::path& path, const char* what) {
  const std::string file = path.string();
  require_regular_file(path, what);
  std::ifstream in(path, std::ios::binary);
  check<IOError>(bool(in), file, ": cannot open (missing or unreadable)");
  std::vector<TokenizerMerge> out;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line[0] == '#')) continue;
    const size_t sp = line.find(' ');
    const bool two = sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                     line.find_first_of(" \t", sp + 1) == std::string::npos && line.find('\t') == std::string::npos;
    check<IOError>(two, file, ":", line_no, ": expected a merge of two tokens separated by one space, got ",
                   quoted(line));
    out.push_back({line.substr(0, sp), line.substr(sp + 1), cat(file, ":", line_no)});
  }
  check<IOError>(!in.bad(), file, ": read failed");
  return out;
}

TokenizerFiles from_pair(const fs::path& vocab, const fs::path& merges) {
  TokenizerFiles t;
  t.vocab = read_json_file(vocab, cat("a tokenizer's ", vocab.filename().string()));
  t.vocab_source = vocab.string();
  t.merges = read_merge_lines(merges, "a tokenizer's merges");
  return t;
}

const json& member(const json& j, const char* key, const std::string& file, const std::string& at) {
  check<IOError>(j.is_object() && j.contains(key), file, ": missing key '", at, "'");
  return j[key];
}

// Keys of tokenizer.json that must be null, false or "" for GPT-2's tokenizer.
void require_unset(const json& j, const char* key, const std::string& file, const std::string& at, const char* why) {
  if (!j.contains(key)) return;
  const json& v = j[key];
  const bool unset =
      v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.get<std::string>().empty());
  check<IOError>(unset, file, ": key '", at, "' is ", v.dump(), "; GPT-2's tokenizer has none (", why, ")");
}

void check_pre_tokenizer(const json& p, const std::string& file, const std::string& at) {
  check<IOError>(p.is_object() && p.value("type", "") == "ByteLevel", file, ": key '", at,
                 "' is not GPT-2's byte-level pre-tokenizer: got ", p.dump().substr(0, 200));
  require_unset(p, "add_prefix_space", file, at + ".add_prefix_space", "text is encoded as it is");
  check<IOError>(p.value("use_regex", true), file, ": key '", at,
                 ".use_regex' is false; GPT-2's tokenizer cuts the text with its regex");
}

TokenizerFiles from_tokenizer_json(const fs::path& path) {
  const std::string file = path.string();
  const json j = read_json_file(path, "a tokenizer's tokenizer.json");
  check<IOError>(j.is_object(), file, ": expected a JSON object, got ", j.type_name());
  require_unset(j, "normalizer", file, "normalizer", "text is not normalized");
  check_pre_tokenizer(member(j, "pre_tokenizer", file, "pre_tokenizer"), file, "pre_tokenizer");
  const json& model = member(j, "model", file, "model");
  check<IOError>(model.value("type", "") == "BPE", file, ": key 'model.type' is ",
                 model.contains("type") ? model["type"].dump() : std::string("missing"), "; expected \"BPE\"");
  require_unset(model, "dropout", file, "model.dropout", "BPE dropout samples merges");
  require_unset(model, "continuing_subword_prefix", file, "model.continuing_subword_prefix", "no word prefixes");
  require_unset(model, "end_of_word_suffix", file, "model.end_of_word_suffix", "no word suffixes");
  require_unset(model, "ignore_merges", file, "model.ignore_merges", "every word is merged");
  require_unset(model, "byte_fallback", file, "model.byte_fallback", "every byte has a token");
  TokenizerFiles t;
  t.vocab = member(model, "vocab", file, "model.vocab");
  t.vocab_source = file + " (model.vocab)";
  if (j.contains("added_tokens")) {
    const json& added = j["added_tokens"];
    check<IOError>(added.is_array(), file, ": key 'added_tokens' is not a list");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string content = added[i].value("content", "");
      check<IOError>(content == "<|endoftext|>" && t.vocab.contains(content) &&
                         t.vocab[content] == added[i].value("id", -1),
                     file, ": key 'added_tokens[", i, "]' (", quoted(content),
                     ") is not supported: the only special token of GPT-2's tokenizer is \"<|endoftext|>\", "
                     "with its id in model.vocab");
    }
  }
  const json& merges = member(model, "merges", file, "model.merges");
  check<IOError>(merges.is_array(), file, ": key 'model.merges' is not a list");
  t.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string where = cat(file, ": model.merges[", i, "]");
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      t.merges.push_back({m[0].get<std::string>(), m[1].get<std::string>(), where});
      continue;
    }
    const std::string s = m.is_string() ? m.get<std::string>() : std::string();
    const size_t sp = s.find(' ');
    check<IOError>(sp != std::string::npos && sp > 0 && sp + 1 < s.size() && s.find(' ', sp + 1) == std::string::npos,
                   where, ": expected \"left right\" or [left, right], got ", m.dump().substr(0, 200));
    t.merges.push_back({s.substr(0, sp), s.substr(sp + 1), where});
  }
  return t;
}

}  // namespace

std::string quoted(std::string_view token) {
  return json(std::string(token)).dump(-1, ' ', false, json::error_handler_t::replace);
}

TokenizerFiles read_tokenizer_files(const fs::path& dir) {
  const auto has = [&](const char* name) { return fs::exists(dir / name); };
  if (has("encoder.json") || has("vocab.bpe")) return from_pair(dir / "encoder.json", dir / "vocab.bpe");
  if (has("vocab.json") && has("merges.txt")) return from_pair(dir / "vocab.json", dir / "merges.txt");
  if (has("tokenizer.json")) return from_tokenizer_json(dir / "tokenizer.json");
  throw IOError(cat(dir.string(), fs::is_directory(dir) ? ": no GPT-2 tokenizer here" : ": no such tokenizer folder",
                    ": expected encoder.json + vocab.bpe (OpenAI's), vocab.json + merges.txt or tokenizer.json ",
                    "(Hugging Face's)"));
}

}  // namespace qkv::data
