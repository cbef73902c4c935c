// The multi-tensor launch layout of the optimizer kernels (kernels/cuda/optim.cu): many
// tensors (one per parameter group entry, each with Depth pointers: Adam's p, g, m, v) packed
// into one by-value kernel argument, each cut into chunks of kChunk elements, one block per
// chunk. first_chunk[] (a prefix sum) maps block b to tensor s with first_chunk[s] <= b <
// first_chunk[s + 1]. Plain C++ with host/device index math, so tests/kernels/ checks on the CPU
// that every element of every tensor is covered by exactly one block.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/cuda/host_device.h"
#include "tensor/error.h"

namespace qkv::kernels::cuda {

inline constexpr int kMaxTensors = 48;   // tensors (groups) per launch
inline constexpr int64_t kChunk = 4096;  // elements per block

template <class T, int Depth> struct TensorList {
  T* ptr[Depth][kMaxTensors];
  int64_t numel[kMaxTensors];
  int64_t first_chunk[kMaxTensors + 1];  // first_chunk[count] = blocks of the launch
  int count;
};
static_assert(sizeof(TensorList<double, 4>) + 128 <= 4096, "kernel parameters over 4 KB");

// The tensor slot and element range [begin, end) of block b's chunk.
template <class T, int Depth>
QKV_HOST_DEVICE int locate(const TensorList<T, Depth>& l, int64_t b, int64_t& begin, int64_t& end) {
  int s = 0;
  while (s + 1 < l.count && l.first_chunk[s + 1] <= b) ++s;
  begin = (b - l.first_chunk[s]) * kChunk;
  end = l.numel[s] < begin + kChunk ? l.numel[s] : begin + kChunk;
  return s;
}

// Calls launch(list, blocks, first_slot) for successive lists of the given tensors (each a row
// of Depth pointers and its element count; empty tensors are left out); first_slot is the
// call-wide index of the list's first chunk. Returns the number of chunks in all.
template <class T, int Depth, class F>
int64_t for_each_list(const std::vector<std::array<T*, Depth>>& ptrs, const std::vector<int64_t>& numels,
                      int64_t first_slot, F&& launch) {
  TensorList<T, Depth> l{};
  int64_t slot = first_slot;
  const auto flush = [&] {
    if (l.count == 0) return;
    const int64_t blocks = l.first_chunk[l.count];
    check<ValueError>(blocks <= int64_t(0x7fffffff), "optimizer kernel: too many blocks for one launch");
    launch(l, blocks, slot);
    slot += blocks;
    l = TensorList<T, Depth>{};
  };
  for (size_t i = 0; i < ptrs.size(); ++i) {
    if (numels[i] == 0) continue;
    for (int d = 0; d < Depth; ++d) l.ptr[d][l.count] = ptrs[i][size_t(d)];
    l.numel[l.count] = numels[i];
    l.first_chunk[l.count + 1] = l.first_chunk[l.count] + (numels[i] + kChunk - 1) / kChunk;
    if (++l.count == kMaxTensors) flush();
  }
  flush();
  return slot - first_slot;
}

}  // namespace qkv::kernels::cuda
