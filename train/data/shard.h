// Data-parallel sharding: every rank walks the same global order and batches, and takes its own
// contiguous rows of each batch, so an epoch serves every example once over all ranks and the
// batches equal a single process's. Augmentation and sampling keyed by the global position draw
// the same on any number of ranks.
#pragma once
#include <cstdint>
#include <utility>

namespace qkv::data {

struct Shard {
  int rank = 0, world = 1;
};

// Rows [first, end) of a batch of n rows that s.rank takes: the first n % world ranks one more.
inline std::pair<int64_t, int64_t> shard_rows(int64_t n, Shard s) {
  const int64_t base = n / s.world, extra = n % s.world, r = s.rank;
  const int64_t first = r * base + (r < extra ? r : extra);
  return {first, first + base + (r < extra ? 1 : 0)};
}

}  // namespace qkv::data
