// Tests of GPT-2's byte-level BPE (train/data/tokens/bpe.h): the real tokenizer under $QKV_DATA
// (default: the shared data folder) against ids from the Python reference
// (tests/tokenizer/expected_ids.json from gpt2_reference.py on corpus.txt), round trips of the
// corpus and of random byte strings (invalid UTF-8 included), the end-of-text token, errors on
// malformed files written here, and a toy vocabulary whose merges are checked against a direct
// string implementation of encoder.py's loop (long words take the heap path).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "tensor/error.h"
#include "tests/support/error_checks.h"
#include "tests/support/gpt2_tokenizer.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/bpe.h"

using namespace qkv;
using qkv::data::Gpt2Tokenizer;
namespace fs = std::filesystem;

namespace {

using test::data_dir;
using test::read_file;
using test::write_file;
using test::TempDir;
using test::check_contains;
using test::error_of;

using test::gpt2;

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) s += char(c);
  else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

// A token's spelling in encoder.json / vocab.bpe: each byte as its GPT-2 alphabet character.
std::string spell(const std::string& bytes) {
  std::string s;
  for (char b : bytes) s += utf8(data::gpt2_byte_to_unicode(uint8_t(b)));
  return s;
}

// A toy vocabulary: the 256 bytes, then one token per merge (in order), then <|endoftext|>.
struct Toy {
  std::vector<std::pair<std::string, std::string>> merges;
  nlohmann::json encoder() const {
    nlohmann::json j = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) j[spell(std::string(1, char(b)))] = b;
    int id = 256;
    for (const auto& [l, r] : merges)
      if (!j.contains(spell(l + r))) j[spell(l + r)] = id++;
    j["<|endoftext|>"] = id;
    return j;
  }
  std::string vocab() const {
    std::string s = "#version: 0.2\n";
    for (const auto& [l, r] : merges) s += spell(l) + " " + spell(r) + "\n";
    return s;
  }
  void write(const fs::path& dir) const {
    write_file(dir / "encoder.json", encoder().dump());
    write_file(dir / "vocab.bpe", vocab());
  }
  // encoder.py's loop over strings: the lowest-rank pair merges everywhere, then again.
  std::vector<std::string> merge_word(const std::string& word) const {
    std::map<std::pair<std::string, std::string>, size_t> rank;
    for (size_t i = 0; i < merges.size(); ++i) rank[merges[i]] = i;
    std::vector<std::string> parts;
    for (char c : word) parts.emplace_back(1, c);
    while (parts.size() > 1) {
      size_t best = SIZE_MAX;
      for (size_t i = 0; i + 1 < parts.size(); ++i)
        if (auto it = rank.find({parts[i], parts[i + 1]}); it != rank.end()) best = std::min(best, it->second);
      if (best == SIZE_MAX) break;
      const auto& [l, r] = merges[best];
      std::vector<std::string> next;
      for (size_t i = 0; i < parts.size();) {
        if (i + 1 < parts.size() && parts[i] == l && parts[i + 1] == r) {
          next.push_back(l + r);
          i += 2;
        } else next.push_back(parts[i++]);
      }
      parts = std::move(next);
    }
    return parts;
  }
};

std::vector<int32_t> ids_of(const nlohmann::json& encoder, const std::vector<std::string>& parts) {
  std::vector<int32_t> ids;
  for (const std::string& p : parts) ids.push_back(encoder.at(spell(p)).get<int32_t>());
  return ids;
}

}  // namespace

TEST_CASE("bpe: known GPT-2 ids" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const Gpt2Tokenizer& tok = gpt2();
  CHECK(tok.eot() == 50256);
  CHECK(tok.vocab_size() == 50257);
  CHECK(tok.encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(tok.decode(std::vector<int32_t>{15496, 995}) == "Hello world");
  CHECK(tok.encode("") == std::vector<int32_t>{});
  CHECK(tok.token_bytes(995) == " world");
}

TEST_CASE("bpe: corpus ids equal the Python reference's expected_ids.json" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const fs::path dir = fs::path(QKV_SOURCE_DIR) / "tests" / "tokenizer";
  const std::string text = read_file(dir / "corpus.txt");
  const std::vector<int32_t> want =
      nlohmann::json::parse(read_file(dir / "expected_ids.json")).get<std::vector<int32_t>>();
  const std::vector<int32_t> got = gpt2().encode(text);
  CHECK(got.size() == want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] == want[i]) continue;
    const size_t lo = i > 5 ? i - 5 : 0;
    const std::span<const int32_t> near = std::span(want).subspan(lo, std::min<size_t>(10, want.size() - lo));
    FAIL("first difference at token ", i, ": got ", got[i], " want ", want[i], " near ",
         nlohmann::json(gpt2().decode(near)).dump());
  }
  CHECK(gpt2().decode(got) == text);
  CHECK(gpt2().decode(gpt2().encode_ordinary(text)) == text);
}

TEST_CASE("bpe: the end-of-text token in encode and encode_ordinary" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const Gpt2Tokenizer& tok = gpt2();
  const std::string text = "one<|endoftext|>two <|endoftext|><|endoftext|>";
  std::vector<int32_t> want = tok.encode_ordinary("one");
  want.push_back(tok.eot());
  for (int32_t id : tok.encode_ordinary("two ")) want.push_back(id);
  want.push_back(tok.eot());
  want.push_back(tok.eot());
  CHECK(tok.encode(text) == want);
  const std::vector<int32_t> ordinary = tok.encode_ordinary(text);
  CHECK(std::find(ordinary.begin(), ordinary.end(), tok.eot()) == ordinary.end());
  CHECK(ordinary.size() > want.size());
  CHECK(tok.decode(want) == text);
  CHECK(tok.decode(ordinary) == text);
  CHECK(tok.encode("<|endoftext|>") == std::vector<int32_t>{tok.eot()});
  CHECK(tok.encode("<|endoftext|") == tok.encode_ordinary("<|endoftext|"));
}

TEST_CASE("bpe: any byte string round-trips (invalid UTF-8 included)" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const Gpt2Tokenizer& tok = gpt2();
  std::mt19937_64 rng(1234);
  // Pieces that mix valid text with every kind of invalid UTF-8.
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "  ",
                                           "\t",
                                           "\n",
                                           "\r\n",
                                           "'s",
                                           "'S",
                                           "42",
                                           ".",
                                           "!?",
                                           "<|endoftext|>",
                                           "\xC3\xA9",
                                           "\xE6\x97\xA5",
                                           "\xF0\x9F\x98\x80",
                                           "\xC2\x85",  // valid: é, 日, 😀, NEL
                                           "\x80",
                                           "\xBF",
                                           "\xC3",
                                           "\xE6\x97",
                                           "\xF0\x9F\x98",
                                           "\xC0\x80",
                                           "\xED\xA0\x80",
                                           "\xF5\x80\x80\x80",
                                           "\xFF",
                                           "\xFE",
                                           std::string(1, '\0')};
  for (int round = 0; round < 400; ++round) {
    std::string s;
    const int len = int(rng() % 200);
    if (round % 2 == 0) {
      for (int i = 0; i < len; ++i) s += char(uint8_t(rng()));
    } else {
      for (int i = 0; i < len / 3; ++i) s += pieces[rng() % pieces.size()];
    }
    INFO("round ", round, ": ", nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    CHECK(tok.decode(tok.encode_ordinary(s)) == s);
    CHECK(tok.decode(tok.encode(s)) == s);
  }
  // Long runs that defeat a quadratic merge loop, and a long stretch of random bytes.
  for (const std::string& s :
       {std::string(300000, 'a'), std::string(200000, ' '), std::string(100000, '7'), std::string(100000, '\xFF')}) {
    CHECK(tok.decode(tok.encode(s)) == s);
  }
  std::string noise(1 << 17, '\0');
  for (char& c : noise) c = char(uint8_t(rng()));
  CHECK(tok.decode(tok.encode(noise)) == noise);
}

TEST_CASE("bpe: encoding from several threads gives the same ids" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const Gpt2Tokenizer& tok = gpt2();
  const std::string text = read_file(fs::path(QKV_SOURCE_DIR) / "tests" / "tokenizer" / "corpus.txt");
  const std::vector<int32_t> want = tok.encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) got[t] = tok.encode(text);
    });
  for (auto& th : threads) th.join();
  for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("bpe: decode names an out-of-range id" * doctest::test_suite("data")) {
  if (!test::have_data({"gpt2-tokenizer"})) return;
  const Gpt2Tokenizer& tok = gpt2();
  check_contains(error_of<ValueError>([&] {
                   tok.decode(std::vector<int32_t>{15496, 50257});
                 }),
                 {"token id 50257", "position 1", "[0, 50257)"});
  check_contains(error_of<ValueError>([&] { tok.decode(std::vector<int32_t>{-1}); }), {"token id -1", "position 0"});
}

TEST_CASE("bpe: toy merges follow encoder.py, on short words and long ones") {
  TempDir tmp;
  Toy toy;
  // Deliberately not in "training order": ("aa", "b") ranks before ("a", "a") creates "aa", and
  // ("b", "b") overlaps itself.
  toy.merges = {{"aa", "b"},  {"a", "a"},  {"b", "b"},       {"a", "b"}, {"aa", "aa"}, {"ab", "ab"},
                {"aab", "a"}, {"bb", "a"}, {"aaaa", "aaaa"}, {" ", "a"}, {" ", " "}};
  toy.write(tmp.path);
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(tmp.path);
  const nlohmann::json enc = toy.encoder();
  CHECK(tok.vocab_size() == int64_t(enc.size()));
  CHECK(tok.eot() == enc["<|endoftext|>"].get<int32_t>());
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; ++round) {
    // One pre-token (letters only): lengths around the 64-byte switch to the heap path.
    const size_t len = round < 100 ? 1 + rng() % 64 : 50 + rng() % 400;
    std::string word;
    const int alphabet = 1 + int(rng() % 2);
    for (size_t i = 0; i < len; ++i) word += "ab"[rng() % size_t(alphabet)];
    if (round % 5 == 0) word = std::string(len, 'a');
    INFO("word ", word);
    CHECK(tok.encode(word) == ids_of(enc, toy.merge_word(word)));
  }
  CHECK(tok.encode(std::string(64, 'a')) == ids_of(enc, toy.merge_word(std::string(64, 'a'))));
  CHECK(tok.encode(std::string(65, 'a')) == ids_of(enc, toy.merge_word(std::string(65, 'a'))));
  CHECK(tok.decode(tok.encode("aab ba <|endoftext|>")) == "aab ba <|endoftext|>");
}

TEST_CASE("bpe: malformed encoder.json and vocab.bpe give IOErrors naming the file") {
  TempDir tmp;
  Toy toy;
  toy.merges = {{"a", "b"}, {"ab", "c"}};
  auto load = [&] { return Gpt2Tokenizer::load(tmp.path); };
  auto io = [&] { return error_of<IOError>(load); };

  check_contains(io(), {tmp.path.string(), "no GPT-2 tokenizer", "encoder.json + vocab.bpe"});
  toy.write(tmp.path);
  CHECK(load().vocab_size() == 259);

  const std::string enc = (tmp.path / "encoder.json").string(), bpe = (tmp.path / "vocab.bpe").string();
  write_file(tmp.path / "encoder.json", "{\"a\": 1,");
  check_contains(io(), {enc, "malformed JSON"});
  write_file(tmp.path / "encoder.json", "[1, 2]");
  check_contains(io(), {enc, "expected a JSON object", "array"});

  auto with = [&](auto edit) {
    nlohmann::json j = toy.encoder();
    edit(j);
    write_file(tmp.path / "encoder.json", j.dump());
    return io();
  };
  check_contains(with([](nlohmann::json& j) { j["ab"] = "x"; }), {enc, "\"ab\"", "expected an integer id"});
  check_contains(with([](nlohmann::json& j) { j["ab"] = 0; }), {enc, "id 0", "more than one token"});
  check_contains(with([](nlohmann::json& j) { j["ab"] = 999; }), {enc, "\"ab\"", "id 999", "outside [0, 259)"});
  check_contains(with([](nlohmann::json& j) {
                   const int32_t id = j["<|endoftext|>"];
                   j.erase("<|endoftext|>");
                   j["zz"] = id;
                 }),
                 {enc, "<|endoftext|>"});
  check_contains(with([](nlohmann::json& j) {  // id 32 goes to "zq": the space byte has no token
                   j.erase(spell(" "));
                   j["zq"] = 32;
                 }),
                 {enc, "byte 0x20", "has no token"});
  check_contains(with([](nlohmann::json& j) {
                   j[" x"] = j["ab"];
                   j.erase("ab");
                 }),
                 {enc, "U+0020", "outside GPT-2's byte alphabet"});
  toy.write(tmp.path);

  fs::remove(tmp.path / "vocab.bpe");
  check_contains(io(), {bpe, "cannot open"});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\na b\nab c extra\n");
  check_contains(io(), {bpe + ":3", "two tokens"});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\na b\nonlyone\n");
  check_contains(io(), {bpe + ":3", "two tokens"});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\na b\nb c\n");
  check_contains(io(), {bpe + ":3", "result", "\"bc\"", "is not a token"});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\nab ab\n");
  check_contains(io(), {bpe + ":2", "result", "\"abab\""});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\na b\nab \xC4\xA0x\xE2\x82\xAC\n");
  check_contains(io(), {bpe + ":3", "U+20AC", "outside GPT-2's byte alphabet"});
  write_file(tmp.path / "vocab.bpe", "#version: 0.2\r\na b\r\nab c\r\n");  // CRLF is fine
  CHECK(load().encode("abc").size() == 1);
}
