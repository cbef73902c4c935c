#include "train/data/tokens/tokenizer_files.h"

#include <algorithm>
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
  t.specials = {"<|endoftext|>"};
  t.end_of_text = "<|endoftext|>";
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

// A string or a flag of a tokenizer.json object, or `fallback` where it is absent or of another
// type (what the checks then compare reads as a mismatch, named by key, never as a type error).
std::string text_or(const json& j, const char* key, const std::string& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}
bool flag_or(const json& j, const char* key, bool fallback) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

// The pre-tokenizer: GPT-2's ByteLevel (its own regex), or Split(regex, isolated) then ByteLevel
// without a regex. Returns the Split's regex, or "" for GPT-2's.
std::string read_pre_tokenizer(const json& p, const std::string& file, const std::string& at) {
  const auto byte_level = [&](const json& b, const std::string& where, bool regex) {
    check<IOError>(b.is_object() && text_or(b, "type", "") == "ByteLevel", file, ": key '", where,
                   "' is not a byte-level pre-tokenizer: got ", b.dump().substr(0, 200));
    require_unset(b, "add_prefix_space", file, where + ".add_prefix_space", "text is encoded as it is");
    check<IOError>(flag_or(b, "use_regex", true) == regex, file, ": key '", where, ".use_regex' is ",
                   flag_or(b, "use_regex", true), "; expected ", regex,
                   regex ? " (GPT-2's tokenizer cuts the text with its regex)"
                         : " (the Split before it cuts the text)");
  };
  if (p.is_object() && text_or(p, "type", "") == "ByteLevel") {
    byte_level(p, at, true);
    return "";
  }
  const bool sequence = p.is_object() && text_or(p, "type", "") == "Sequence" && p.contains("pretokenizers") &&
                        p["pretokenizers"].is_array() && p["pretokenizers"].size() == 2;
  check<IOError>(sequence, file, ": key '", at,
                 "' is neither GPT-2's ByteLevel pre-tokenizer nor a Sequence of Split (a regex) and ByteLevel: got ",
                 p.dump().substr(0, 200));
  const json& split = p["pretokenizers"][0];
  const std::string where = at + ".pretokenizers[0]";
  check<IOError>(split.is_object() && text_or(split, "type", "") == "Split" && split.contains("pattern") &&
                     split["pattern"].is_object() && split["pattern"].contains("Regex") &&
                     split["pattern"]["Regex"].is_string(),
                 file, ": key '", where, "' is not a Split on a regex: got ", split.dump().substr(0, 200));
  check<IOError>(text_or(split, "behavior", "") == "Isolated" && !flag_or(split, "invert", false), file, ": key '",
                 where, "': only Split's isolated matches (behavior \"Isolated\", invert false) are read, got ",
                 split.dump().substr(0, 200));
  byte_level(p["pretokenizers"][1], at + ".pretokenizers[1]", false);
  return split["pattern"]["Regex"].get<std::string>();
}

// tokenizer_config.json's eos_token beside tokenizer.json ("" when it has none).
std::string eos_token_of(const fs::path& dir) {
  const fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config)) return "";
  const json j = read_json_file(config, "a tokenizer's tokenizer_config.json");
  if (!j.is_object() || !j.contains("eos_token")) return "";
  const json& e = j["eos_token"];
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("content") && e["content"].is_string()) return e["content"].get<std::string>();
  return "";
}

TokenizerFiles from_tokenizer_json(const fs::path& path) {
  const std::string file = path.string();
  const json j = read_json_file(path, "a tokenizer's tokenizer.json");
  check<IOError>(j.is_object(), file, ": expected a JSON object, got ", j.type_name());
  require_unset(j, "normalizer", file, "normalizer", "text is not normalized");
  TokenizerFiles t;
  t.pattern = read_pre_tokenizer(member(j, "pre_tokenizer", file, "pre_tokenizer"), file, "pre_tokenizer");
  t.pattern_source = file + ": pre_tokenizer";
  const json& model = member(j, "model", file, "model");
  check<IOError>(text_or(model, "type", "") == "BPE", file, ": key 'model.type' is ",
                 model.contains("type") ? model["type"].dump() : std::string("missing"), "; expected \"BPE\"");
  require_unset(model, "dropout", file, "model.dropout", "BPE dropout samples merges");
  require_unset(model, "continuing_subword_prefix", file, "model.continuing_subword_prefix", "no word prefixes");
  require_unset(model, "end_of_word_suffix", file, "model.end_of_word_suffix", "no word suffixes");
  require_unset(model, "byte_fallback", file, "model.byte_fallback", "every byte has a token");
  t.ignore_merges = flag_or(model, "ignore_merges", false);
  t.vocab = member(model, "vocab", file, "model.vocab");
  t.vocab_source = file + " (model.vocab)";
  if (j.contains("added_tokens")) {
    const json& added = j["added_tokens"];
    check<IOError>(added.is_array(), file, ": key 'added_tokens' is not a list");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string content = text_or(added[i], "content", "");
      const json id = added[i].is_object() && added[i].contains("id") ? added[i]["id"] : json();
      check<IOError>(!content.empty() && flag_or(added[i], "special", false) && id.is_number_integer() &&
                         (!t.vocab.is_object() || !t.vocab.contains(content) || t.vocab[content] == id),
                     file, ": key 'added_tokens[", i, "]' (", data::quoted(content),
                     ") is not supported: added tokens must be special, with an id that model.vocab, when it has ",
                     "the token, agrees with");
      if (t.vocab.is_object()) t.vocab[content] = id;  // in model.vocab or beside it
      t.specials.push_back(content);
    }
  }
  const auto is_special = [&](const std::string& s) {
    return std::find(t.specials.begin(), t.specials.end(), s) != t.specials.end();
  };
  t.end_of_text = is_special("<|endoftext|>") ? "<|endoftext|>" : eos_token_of(path.parent_path());
  check<IOError>(!t.end_of_text.empty() && is_special(t.end_of_text), file,
                 ": no end-of-text token: no special \"<|endoftext|>\" in added_tokens, and tokenizer_config.json's ",
                 "eos_token is ",
                 t.end_of_text.empty() ? std::string("missing") : data::quoted(t.end_of_text) + ", not one");
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
