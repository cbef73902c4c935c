// The warp shuffles and votes for an emulated build (QKV_CUDA_EMU), with the CUDA Programming
// Guide's semantics: __shfl_sync (lane srcLane of the caller's width-segment), __shfl_up_sync and
// __shfl_down_sync (delta lanes before or after, the caller's own value where that leaves the
// segment), __shfl_xor_sync (lane ^ laneMask; a later segment gives the caller's own value),
// __ballot_sync, __all_sync and __any_sync. Each is a warp collective (cuda_emu/block.h):
// every lane of the mask must call it, and reading a lane outside the mask is a Divergence.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace qkv::cuda_emu {

enum class ShuffleKind { index, up, down, xor_ };

// The 8 bytes `bits` of each lane of `mask`, shuffled as `kind` with `arg` (srcLane, delta or
// laneMask) in segments of `width` lanes.
uint64_t shuffle_bits(ShuffleKind kind, uint32_t mask, uint64_t bits, int arg, int width);
uint32_t ballot(uint32_t mask, bool predicate);

template <class T> T shuffle(ShuffleKind kind, uint32_t mask, T value, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle_bits(kind, mask, bits, arg, width);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace qkv::cuda_emu

template <class T> T __shfl_sync(uint32_t mask, T v, int src, int width = 32) {
  return qkv::cuda_emu::shuffle(qkv::cuda_emu::ShuffleKind::index, mask, v, src, width);
}
template <class T> T __shfl_up_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  return qkv::cuda_emu::shuffle(qkv::cuda_emu::ShuffleKind::up, mask, v, int(delta), width);
}
template <class T> T __shfl_down_sync(uint32_t mask, T v, unsigned delta, int width = 32) {
  return qkv::cuda_emu::shuffle(qkv::cuda_emu::ShuffleKind::down, mask, v, int(delta), width);
}
template <class T> T __shfl_xor_sync(uint32_t mask, T v, int lane_mask, int width = 32) {
  return qkv::cuda_emu::shuffle(qkv::cuda_emu::ShuffleKind::xor_, mask, v, lane_mask, width);
}
inline uint32_t __ballot_sync(uint32_t mask, int predicate) { return qkv::cuda_emu::ballot(mask, predicate != 0); }
inline int __all_sync(uint32_t mask, int predicate) { return qkv::cuda_emu::ballot(mask, predicate != 0) == mask; }
inline int __any_sync(uint32_t mask, int predicate) { return qkv::cuda_emu::ballot(mask, predicate != 0) != 0; }
