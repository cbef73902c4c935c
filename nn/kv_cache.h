// The KV cache of incremental decoding: per layer, the keys and (unless the variant ties V to K)
// the values of every position decoded so far, shaped by the KV heads [B, Hk, capacity, dh].
// A K=V variant stores one tensor per layer, so its bytes, counted from the allocation, are half
// of QKV's; GQA/MQA shrink Hk. Buffers are allocated once, at full capacity, through the device's
// caching allocator, so the allocator's counters measure exactly what the cache holds.
#pragma once
#include <vector>

#include "nn/attention.h"

namespace qkv::nn {

class KVCache {
 public:
  // `dtype` is the storage type (float32, or bfloat16/float16 to halve it); attention reads
  // the cached entries in that dtype, in place (kernels/cpu/attention.cpp converts one tile at
  // a time), never as a float32 copy of the prefix.
  KVCache(const AttentionConfig& attention, int64_t layers, int64_t batch, int64_t capacity, DType dtype = DType::f32,
          const Device& device = kCPU);

  int64_t length() const { return length_; }  // positions filled
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  bool stores_values() const { return attention_.pattern().cache_tensors() == 2; }
  DType dtype() const { return dtype_; }

  // Writes layer `layer`'s k and v [B, Hk, T, dh] (v ignored when K=V) after the filled
  // positions and returns the keys and values of positions [0, length() + T): views of the
  // cache, in its dtype. K and V are one tensor when tied.
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v);
  // Marks T more positions filled, once every layer has appended them.
  void advance(int64_t T);
  // The static decode step (GPT::decode_step): writes layer `layer`'s k and v [B, Hk, T, dh] at
  // the position `start` (one int64) holds, read on the device, and returns the layer's whole
  // cache (every position of its capacity) for cache_attention. length() is not used.
  std::pair<Tensor, Tensor> write_at(int64_t layer, const Tensor& k, const Tensor& v, const Tensor& start);
  void reset() { length_ = 0; }

  // Bytes the cache holds: its tensors' storage.
  int64_t bytes() const;
  // Closed form per token of one sequence: (1 if K=V else 2) x Hk x dh x bytes(dtype) x layers.
  static int64_t bytes_per_token(const AttentionConfig& attention, int64_t layers, DType dtype);

 private:
  AttentionConfig attention_;
  int64_t batch_, capacity_, length_ = 0;
  DType dtype_;
  std::vector<Tensor> keys_, values_;  // per layer; values_ empty when K=V
};

}  // namespace qkv::nn
