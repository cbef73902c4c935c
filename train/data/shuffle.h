// The one shuffle every batch source uses (in-memory tensors, the image loader, token windows):
// epoch e's order of n samples is the Philox permutation keyed by (seed, e), so an order depends
// on nothing but (n, seed, epoch) — not on threads, not on how many batches ran before — and a
// resumed run sees the order an uninterrupted one would. stream_key separates the other streams
// that one seed feeds per epoch (the loader's augmentation draws).
#pragma once
#include <cstdint>
#include <vector>

namespace qkv::data {

// splitmix64's finalizer: a bijection that scatters nearby inputs.
uint64_t mix64(uint64_t x);

// The Philox key of one purpose's stream in one epoch.
uint64_t stream_key(uint64_t seed, int64_t epoch, uint64_t stream);
inline constexpr uint64_t kShuffleStream = 0x73687566666C65ull;  // "shuffle"
inline constexpr uint64_t kAugmentStream = 0x6175676D656E74ull;  // "augment"

// A permutation of 0..n-1 from the Philox stream keyed by `key`: the argsort of n 64-bit uniform
// keys (ties by index), so it depends only on (n, key).
std::vector<int64_t> philox_permutation(int64_t n, uint64_t key);

// Epoch `epoch`'s order of n samples under `seed`.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace qkv::data
