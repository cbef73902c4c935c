// CUB's DeviceRadixSort::SortPairs for the emulated device (QKV_CUDA_EMU), with its contract: a
// stable sort of (key, value) pairs by key over key bits [begin_bit, end_bit) (the kernels pass
// every bit), signed keys in numeric order; a first call with null temporary storage asks for its
// size. cuda_emu/device.h gives it to the kernels in place of <cub/device/device_radix_sort.cuh>.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cuda_emu/device_memory.h"

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const Key* keys_in, Key* keys_out,
                               const Value* values_in, Value* values_out, int n, int begin_bit = 0,
                               int end_bit = int(sizeof(Key) * 8), cudaStream_t = nullptr) {
    if (temp == nullptr) {
      temp_bytes = 1;
      return cudaSuccess;
    }
    if (begin_bit != 0 || end_bit != int(sizeof(Key) * 8)) return cudaErrorInvalidValue;  // not needed here
    const qkv::cuda_emu::DeviceAccess access;
    std::vector<int> order(size_t(n > 0 ? n : 0));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
    for (int i = 0; i < n; ++i) {
      keys_out[i] = keys_in[order[size_t(i)]];
      values_out[i] = values_in[order[size_t(i)]];
    }
    return cudaSuccess;
  }
};

}  // namespace cub
