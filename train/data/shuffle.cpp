#include "train/data/shuffle.h"

#include <algorithm>

#include "tensor/error.h"
#include "tensor/philox.h"

namespace qkv::data {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t stream_key(uint64_t seed, int64_t epoch, uint64_t stream) {
  return mix64(mix64(seed ^ mix64(uint64_t(epoch) + 0x9E3779B97F4A7C15ull)) ^ stream);
}

std::vector<int64_t> philox_permutation(int64_t n, uint64_t key) {
  check<ValueError>(n >= 0, "philox_permutation: n must be non-negative, got ", n);
  std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const philox::U32x4 b = philox::block(key, uint64_t(i));
    keyed[size_t(i)] = {(uint64_t(b.v[0]) << 32) | b.v[1], i};
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = keyed[size_t(i)].second;
  return order;
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  return philox_permutation(n, stream_key(seed, epoch, kShuffleStream));
}

}  // namespace qkv::data
