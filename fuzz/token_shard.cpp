// Token shards: the input as one shard file, mapped and checked by read_token_shard; every
// token the reader accepts is then read (it must lie in the vocabulary).
#include <cstdio>
#include <cstdlib>

#include "fuzz/support.h"
#include "train/data/tokens/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const auto path = fuzz::scratch() / "train_000000.bin";
  fuzz::write_file(path, fuzz::as_text(data, size));
  fuzz::run_reader([&] {
    const data::TokenShard shard = data::read_token_shard(path);
    for (int64_t i = 0; i < shard.size(); ++i)
      if (shard[i] >= shard.vocab_size()) {
        std::fprintf(stderr, "fuzz: token %d at %lld is outside the vocabulary of %lld\n", int(shard[i]), (long long)i,
                     (long long)shard.vocab_size());
        std::abort();
      }
  });
  return 0;
}
