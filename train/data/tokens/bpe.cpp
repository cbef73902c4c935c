// Gpt2Tokenizer: building the tables from the files (tokenizer_files.h), GPT-2's pre-tokenization regex through
// PCRE2, rank-ordered merges with a per-word cache, and decoding.
//
// Merges run on token ids: the pair (left id, right id) maps to its rank and the merged id.
// The merge loop follows encoder.py exactly: take the adjacent pair of lowest rank and merge all
// of its occurrences, left to right without overlap, then look again. Short words do this
// directly; long ones (a megabyte without a space is valid input) use a heap over a linked list
// that applies the same passes in O(n log n).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "train/data/tokens/bpe.h"
#include "train/data/tokens/tokenizer_files.h"
#include "train/data/tokens/utf8.h"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "io/input_file.h"
#include "io/json_read.h"
#include "tensor/error.h"

namespace qkv::data {

namespace {

namespace fs = std::filesystem;

// GPT-2's pattern; \s is widened by U+0085 to match Python's `regex` (Unicode White_Space).
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\x{85}\\p{L}\\p{N}]+|[\\s\\x{85}]+(?![^\\s\\x{85}])|"
    "[\\s\\x{85}]+";

// A tokenizer.json's regex for PCRE2: \s and \S widened by U+0085 as in GPT-2's pattern above
// (Hugging Face's regex engines take \s as Unicode White_Space; PCRE2's \s under UCP leaves NEL
// out). Everything else is the same syntax in both.
std::string pcre2_pattern(std::string_view hf) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < hf.size(); ++i) {
    const char c = hf[i];
    if (c == '\\' && i + 1 < hf.size()) {
      const char e = hf[++i];
      if (e == 's') out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      else if (e == 'S' && !in_class) out += "[^\\s\\x{85}]";
      else out += {c, e};
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class && out.back() != '[' && !(out.back() == '^' && out[out.size() - 2] == '['))
      in_class = false;
    out += c;
  }
  return out;
}

// Words up to this many bytes are merged by the direct loop and cached.
constexpr size_t kDirectMaxBytes = 64;
constexpr size_t kCacheShards = 64;
constexpr size_t kCacheShardLimit = 1 << 12;  // entries per shard before it is cleared (~256k words)

struct ByteTable {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 512> to_byte{};  // code point -> byte, -1 outside the alphabet
  ByteTable() {
    to_byte.fill(-1);
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[size_t(b)] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[size_t(b)] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[size_t(b)] = true;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = printable[size_t(b)] ? char32_t(b) : char32_t(next++);
      to_unicode[size_t(b)] = c;
      to_byte[size_t(c)] = b;
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

std::string describe_char(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(c));
  return buf;
}

// The bytes a token string of encoder.json / vocab.bpe stands for; empty string and an error
// message in `why` when a character is outside the byte alphabet.
std::string token_to_bytes(std::string_view token, std::string& why) {
  std::u32string cps;
  if (!decode_utf8(token, cps)) {
    why = "is not valid UTF-8";
    return {};
  }
  std::string bytes;
  bytes.reserve(cps.size());
  for (char32_t c : cps) {
    const int b = c < 512 ? byte_table().to_byte[size_t(c)] : -1;
    if (b < 0) {
      why = cat("has character ", describe_char(c), ", which is outside GPT-2's byte alphabet");
      return {};
    }
    bytes.push_back(char(b));
  }
  if (bytes.empty()) why = "is empty";
  return bytes;
}

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Merge {
  int32_t rank;
  int32_t merged;
};

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

}  // namespace

struct Gpt2Tokenizer::Impl {
  std::vector<std::string> id_to_bytes;
  std::unordered_map<std::string, int32_t, SvHash, std::equal_to<>> bytes_to_id;
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<uint64_t, Merge> merges;
  int32_t eot = -1;
  std::vector<std::pair<std::string, int32_t>> specials;  // spelled-out special tokens and their ids
  bool ignore_merges = false;

  pcre2_code* regex = nullptr;
  bool jit = false;

  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, SvHash, std::equal_to<>> words;
  };
  mutable std::array<CacheShard, kCacheShards> cache;

  ~Impl() {
    if (regex) pcre2_code_free(regex);
  }

  const Merge* find_merge(int32_t a, int32_t b) const {
    const auto it = merges.find(pair_key(a, b));
    return it == merges.end() ? nullptr : &it->second;
  }

  // GPT-2's pattern, or a tokenizer.json's (`source` names where it was read, for errors).
  void compile_regex(const std::string& pattern, const std::string& source) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const std::string p = pattern.empty() ? std::string(kGpt2Pattern) : pcre2_pattern(pattern);
    regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.c_str()), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (!regex) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      const std::string where = pattern.empty() ? std::string("Gpt2Tokenizer") : source;
      throw IOError(cat(where, ": PCRE2 rejected the pre-tokenization pattern at offset ", offset, ": ",
                        reinterpret_cast<const char*>(msg)));
    }
    jit = pcre2_jit_compile(regex, PCRE2_JIT_COMPLETE) == 0;  // the interpreter otherwise
  }

  // Merges by the encoder.py loop on a short word.
  void bpe_direct(std::string_view word, std::vector<int32_t>& out) const {
    int32_t ids[kDirectMaxBytes];
    size_t n = word.size();
    for (size_t i = 0; i < n; ++i) ids[i] = byte_id[uint8_t(word[i])];
    while (n > 1) {
      const Merge* best = nullptr;
      int32_t a = 0, b = 0;
      for (size_t i = 0; i + 1 < n; ++i) {
        const Merge* m = find_merge(ids[i], ids[i + 1]);
        if (m && (!best || m->rank < best->rank)) {
          best = m;
          a = ids[i];
          b = ids[i + 1];
        }
      }
      if (!best) break;
      size_t w = 0;
      for (size_t i = 0; i < n;) {
        if (i + 1 < n && ids[i] == a && ids[i + 1] == b) {
          ids[w++] = best->merged;
          i += 2;
        } else ids[w++] = ids[i++];
      }
      n = w;
    }
    out.insert(out.end(), ids, ids + n);
  }

  // The same passes on a long word: a heap of candidate pairs ordered by (rank, position) over
  // a linked list of tokens. All occurrences of the lowest-rank pair merge before the pairs
  // they create are considered, as in encoder.py.
  void bpe_heap(std::string_view word, std::vector<int32_t>& out) const {
    const int32_t n = int32_t(word.size());
    const size_t len = word.size();
    std::vector<int32_t> tok(len), prev(len), next(len);
    std::vector<uint8_t> alive(len, 1);
    for (int32_t i = 0; i < n; ++i) {
      tok[size_t(i)] = byte_id[uint8_t(word[size_t(i)])];
      prev[size_t(i)] = i - 1;
      next[size_t(i)] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
      int32_t rank, pos, left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](int32_t p) {
      const int32_t q = next[size_t(p)];
      if (q < 0) return;
      if (const Merge* m = find_merge(tok[size_t(p)], tok[size_t(q)]))
        heap.push({m->rank, p, tok[size_t(p)], tok[size_t(q)]});
    };
    auto valid = [&](const Cand& c) {
      if (!alive[size_t(c.pos)]) return false;
      const int32_t q = next[size_t(c.pos)];
      return q >= 0 && tok[size_t(c.pos)] == c.left && tok[size_t(q)] == c.right;
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    std::vector<int32_t> touched;
    while (!heap.empty()) {
      if (!valid(heap.top())) {
        heap.pop();
        continue;
      }
      const int32_t rank = heap.top().rank;
      const int32_t merged = find_merge(heap.top().left, heap.top().right)->merged;
      touched.clear();
      while (!heap.empty() && heap.top().rank == rank) {
        const Cand c = heap.top();
        heap.pop();
        if (!valid(c)) continue;
        const int32_t q = next[size_t(c.pos)];
        tok[size_t(c.pos)] = merged;
        alive[size_t(q)] = 0;
        next[size_t(c.pos)] = next[size_t(q)];
        if (next[size_t(q)] >= 0) prev[size_t(next[size_t(q)])] = c.pos;
        touched.push_back(c.pos);
      }
      for (int32_t p : touched) {
        if (prev[size_t(p)] >= 0) push(prev[size_t(p)]);
        push(p);
      }
    }
    for (int32_t p = 0; p >= 0; p = next[size_t(p)]) out.push_back(tok[size_t(p)]);
  }

  void bpe_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.size() == 1) {
      out.push_back(byte_id[uint8_t(word[0])]);
      return;
    }
    if (ignore_merges)  // a word that is a token is taken whole (Llama 3's tokenizer)
      if (const auto it = bytes_to_id.find(word); it != bytes_to_id.end()) {
        out.push_back(it->second);
        return;
      }
    if (word.size() > kDirectMaxBytes) {
      bpe_heap(word, out);
      return;
    }
    const size_t h = SvHash{}(word);
    CacheShard& shard = cache[(h >> 7) % kCacheShards];
    {
      std::lock_guard<std::mutex> lock(shard.mutex);
      if (auto it = shard.words.find(word); it != shard.words.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t start = out.size();
    bpe_direct(word, out);
    std::vector<int32_t> ids(out.begin() + std::ptrdiff_t(start), out.end());
    std::lock_guard<std::mutex> lock(shard.mutex);
    if (shard.words.size() >= kCacheShardLimit) shard.words.clear();
    shard.words.emplace(std::string(word), std::move(ids));
  }

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex, nullptr);
    if (!md) throw OutOfMemory("Gpt2Tokenizer: cannot allocate PCRE2 match data");
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> guard(md, pcre2_match_data_free);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    const PCRE2_SIZE n = text.size();
    PCRE2_SIZE pos = 0;
    while (pos < n) {
      int rc = pcre2_match(regex, subject, n, pos, 0, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = pcre2_match(regex, subject, n, pos, PCRE2_NO_JIT, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {  // only bytes that are not UTF-8 remain
        bpe_word(text.substr(pos), out);
        break;
      }
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw ValueError(cat("Gpt2Tokenizer::encode: pre-tokenization failed at byte ", pos, ": ",
                             reinterpret_cast<const char*>(msg)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const PCRE2_SIZE begin = ov[0], end = ov[1];
      if (begin > pos) bpe_word(text.substr(pos, begin - pos), out);  // a run of invalid UTF-8
      if (end <= begin) {  // cannot happen with this pattern; guards against an endless loop
        bpe_word(text.substr(begin, 1), out);
        pos = begin + 1;
        continue;
      }
      bpe_word(text.substr(begin, end - begin), out);
      pos = end;
    }
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

char32_t gpt2_byte_to_unicode(uint8_t byte) { return byte_table().to_unicode[byte]; }

Gpt2Tokenizer Gpt2Tokenizer::load(const fs::path& dir) {
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;

  // The vocabulary: {"token": id, ...}, ids 0..N-1 each once.
  const TokenizerFiles files = read_tokenizer_files(dir);
  const nlohmann::json& j = files.vocab;
  const std::string& enc = files.vocab_source;
  check<IOError>(j.is_object(), enc, ": expected a JSON object mapping token strings to ids, got ", j.type_name());
  check<IOError>(!j.empty(), enc, ": the token table is empty");
  check<IOError>(j.size() < size_t(INT32_MAX), enc, ": too many tokens (", j.size(), ")");
  const int64_t n = int64_t(j.size());
  t.id_to_bytes.resize(size_t(n));
  std::vector<uint8_t> seen(size_t(n), 0);
  t.bytes_to_id.reserve(size_t(n));
  for (const auto& [key, value] : j.items()) {
    check<IOError>(value.is_number_integer(), enc, ": token ", quoted(key), ": expected an integer id, got ",
                   value.dump());
    const int64_t id = value.get<int64_t>();
    check<IOError>(id >= 0 && id < n, enc, ": token ", quoted(key), ": id ", id, " is outside [0, ", n,
                   "): ids must be 0..N-1 for N = ", n, " tokens");
    check<IOError>(!seen[size_t(id)], enc, ": id ", id, " is given to more than one token (", quoted(key), ")");
    seen[size_t(id)] = 1;
    std::string bytes;
    const bool special = std::find(files.specials.begin(), files.specials.end(), key) != files.specials.end();
    if (special) {  // spelled out, never merged into
      bytes = key;
      t.specials.emplace_back(key, int32_t(id));
      if (key == files.end_of_text) t.eot = int32_t(id);
    } else {
      std::string why;
      bytes = token_to_bytes(key, why);
      check<IOError>(why.empty(), enc, ": token ", quoted(key), " ", why);
    }
    t.id_to_bytes[size_t(id)] = bytes;
    if (!special) t.bytes_to_id.emplace(std::move(bytes), int32_t(id));
  }
  check<IOError>(t.eot >= 0, enc, ": no ", quoted(files.end_of_text), " entry (the end-of-text token)");
  // Longer spellings first, so that a special token containing another is found whole.
  std::sort(t.specials.begin(), t.specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t.ignore_merges = files.ignore_merges;
  for (int b = 0; b < 256; ++b) {
    const auto it = t.bytes_to_id.find(std::string(1, char(b)));
    check<IOError>(it != t.bytes_to_id.end(), enc, ": byte 0x", std::hex, b, std::dec, " (character ",
                   describe_char(byte_table().to_unicode[size_t(b)]), ") has no token; every byte needs one");
    t.byte_id[size_t(b)] = it->second;
  }

  // The merges, by rank.
  int32_t rank = 0;
  for (const TokenizerMerge& merge : files.merges) {
    std::string why;
    const std::string left = token_to_bytes(merge.left, why);
    check<IOError>(why.empty(), merge.where, ": token ", quoted(merge.left), " ", why);
    const std::string right = token_to_bytes(merge.right, why);
    check<IOError>(why.empty(), merge.where, ": token ", quoted(merge.right), " ", why);
    auto id_of = [&](const std::string& bytes, const std::string& spelled, const char* role) {
      const auto it = t.bytes_to_id.find(bytes);
      check<IOError>(it != t.bytes_to_id.end(), merge.where, ": the merge's ", role, " ", quoted(spelled),
                     " is not a token of ", enc);
      return it->second;
    };
    const int32_t a = id_of(left, merge.left, "left part"), b = id_of(right, merge.right, "right part");
    const int32_t m = id_of(left + right, merge.left + merge.right, "result");
    check<IOError>(rank < INT32_MAX, merge.where, ": too many merges");
    t.merges[pair_key(a, b)] = Merge{rank++, m};  // a repeated pair keeps its last rank, as a dict would
  }
  t.compile_regex(files.pattern, files.pattern_source);
  return Gpt2Tokenizer(std::move(impl));
}

std::vector<int32_t> Gpt2Tokenizer::encode_ordinary(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  impl_->encode_ordinary(text, out);
  return out;
}

void Gpt2Tokenizer::encode_ordinary_into(std::string_view text, std::vector<int32_t>& out) const {
  impl_->encode_ordinary(text, out);
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  for (;;) {
    // The first special token spelled out from pos (the longest where several start there).
    size_t hit = std::string_view::npos;
    const std::pair<std::string, int32_t>* found = nullptr;
    for (const auto& s : impl_->specials) {
      const size_t at = text.find(s.first, pos);
      if (at < hit) {
        hit = at;
        found = &s;
      }
    }
    impl_->encode_ordinary(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos), out);
    if (!found) break;
    out.push_back(found->second);
    pos = hit + found->first.size();
  }
  return out;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  const int64_t n = vocab_size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    check<ValueError>(id >= 0 && id < n, "Gpt2Tokenizer::decode: token id ", id, " at position ", i,
                      " is outside the vocabulary [0, ", n, ")");
    out += impl_->id_to_bytes[size_t(id)];
  }
  return out;
}

const std::string& Gpt2Tokenizer::token_bytes(int32_t id) const {
  check<ValueError>(id >= 0 && id < vocab_size(), "Gpt2Tokenizer::token_bytes: token id ", id,
                    " is outside the vocabulary [0, ", vocab_size(), ")");
  return impl_->id_to_bytes[size_t(id)];
}

int32_t Gpt2Tokenizer::eot() const { return impl_->eot; }
int64_t Gpt2Tokenizer::vocab_size() const { return int64_t(impl_->id_to_bytes.size()); }

}  // namespace qkv::data
