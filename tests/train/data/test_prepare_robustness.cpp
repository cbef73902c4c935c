// `data prepare` against interruptions: the temporary files a killed prepare left in its output
// folder are removed by the next one, which says so, and a folder another process is preparing
// is refused with that process named; the automatic prepare of data that is already prepared
// waits for the folder's lock and removes what a killed re-prepare left. The tokenizer is a byte-level one written by
// the test (the 256 bytes and end-of-text, no merges), so no data folder is needed.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "tensor/error.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"
#include "train/data/tokens/bpe.h"
#include "train/data/tokens/prepare_dataset.h"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) return std::string(1, char(c));
  s += char(0xC0 | (c >> 6));  // GPT-2's byte alphabet stays below U+0800
  s += char(0x80 | (c & 0x3F));
  return s;
}

fs::path byte_tokenizer(const fs::path& dir) {
  fs::create_directories(dir);
  nlohmann::json enc = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) enc[utf8(data::gpt2_byte_to_unicode(uint8_t(b)))] = b;
  enc["<|endoftext|>"] = 256;
  test::write_file(dir / "encoder.json", enc.dump());
  test::write_file(dir / "vocab.bpe", "#version: 0.2\n");
  return dir;
}

data::PrepareOptions options(const test::TempDir& tmp) {
  data::PrepareOptions o;
  o.inputs = {tmp.write("a.txt", "To be, or not to be, that is the question.")};
  o.tokenizer = byte_tokenizer(tmp.path / "tok");
  o.out = tmp.path / "tokens";
  o.val_fraction = 0.25;
  o.shard_tokens = 16;
  o.progress = false;
  return o;
}

}  // namespace

TEST_CASE("data prepare: the temporary files of a killed prepare are removed by the next one") {
  test::TempDir tmp("prepare-temps");
  const data::PrepareOptions o = options(tmp);
  fs::create_directories(o.out);
  // What a prepare killed while writing its second train shard leaves behind.
  const std::vector<fs::path> stale = {o.out / ".tokens.tmp.999999.0a0b0c0d",
                                       o.out / ".train_000001.bin.tmp.999999.00000001",
                                       o.out / ".dataset.json.tmp.999999.ffffffff",
                                       o.out / "train_000000.bin.tmp.999998", o.out / ".tokens.999997.tmp"};
  for (const auto& f : stale) test::write_file(f, "partial");
  const std::string said = test::captured([&](std::FILE* log) { data::prepare_dataset(o, log); });
  for (const auto& f : stale) {
    CHECK_MESSAGE(!fs::exists(f), f.string());
    test::check_contains(said, {"removed " + f.string() + ", a temporary file an interrupted prepare left"});
  }
  // The folder holds the shards, dataset.json and the lock file, and nothing temporary.
  for (const auto& e : fs::directory_iterator(o.out))
    CHECK_MESSAGE(!is_temp_file_name(e.path().filename().string()), e.path().string());
  const data::DatasetInfo info = data::read_dataset_info(o.out);
  CHECK(info.split("train").tokens + info.split("val").tokens == 43);  // one end-of-text and 42 bytes
}

TEST_CASE("data prepare: a folder another process is preparing is refused, naming it") {
  test::TempDir tmp("prepare-lock");
  const data::PrepareOptions o = options(tmp);
  {
    const FolderLock other(o.out, "dataset folder");
    test::check_contains(test::error_of<IOError>([&] { data::prepare_dataset(o, nullptr); }),
                         {"dataset folder " + o.out.string(), "in use by another process",
                          "pid " + std::to_string(::getpid())});
    CHECK_FALSE(fs::exists(o.out / "dataset.json"));
  }
  CHECK(data::prepare_once(o, nullptr) == o.out);
  CHECK(fs::exists(o.out / "dataset.json"));
}

TEST_CASE("data prepare: prepare_once of up-to-date data waits for the lock and removes a killed re-prepare's files") {
  test::TempDir tmp("prepare-once-temps");
  const data::PrepareOptions o = options(tmp);
  data::prepare_dataset(o, nullptr);
  const std::string before = test::read_file(o.out / "dataset.json");
  // A re-prepare of the same folder killed while writing a shard: dataset.json is still the old,
  // complete one.
  const fs::path stale = o.out / ".train_000000.bin.tmp.999999.00000001";
  test::write_file(stale, "partial");
  const std::string said = test::captured([&](std::FILE* log) { data::prepare_once(o, log); });
  CHECK_FALSE(fs::exists(stale));
  test::check_contains(said, {"removed " + stale.string()});
  CHECK(test::read_file(o.out / "dataset.json") == before);  // up to date: not prepared again

  // While another process holds the folder, prepare_once waits for it rather than reading past it.
  std::atomic<bool> released{false};
  std::thread holder([&] {
    const FolderLock other(o.out, "dataset folder");
    test::write_file(stale, "partial");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  data::prepare_once(o, nullptr);
  CHECK(released.load());
  CHECK_FALSE(fs::exists(stale));
  holder.join();
}
