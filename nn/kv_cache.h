// The KV cache of incremental decoding: per layer, the keys and (unless the variant ties V to K)
// the values of every position decoded so far, shaped by the KV heads [B, Hk, capacity, dh]
// (dh + r with the low-rank V residual: the row [K | X A], nn/attention.h).
// A K=V variant stores one tensor per layer, so its bytes, counted from the allocation, are half
// of QKV's; GQA/MQA shrink Hk. Buffers are allocated once, at full capacity, through the device's
// caching allocator, so the allocator's counters measure exactly what the cache holds.
// With linear attention (nn/linear_attention.h) the cache is the recurrent state instead, per
// layer S [B, H, dh, dh] and n [B, H, 1, dh] in float32: the same bytes at every length.
// An int8 cache stores each row (one position of one KV head) as int8 with a float32 scale
// (symmetric, max |x| / 127; quantize_int8): dh + 4 bytes a row instead of 2 dh (bf16).
#pragma once
#include <vector>

#include "nn/attention.h"

namespace qkv::nn {

// One layer's cache as attention reads it: keys and values (one tensor when K=V) and, for an
// int8 cache, their row scales [B, Hk, positions, 1] (undefined otherwise).
struct CachedKV {
  Tensor keys, values, key_scales, value_scales;
  bool quantized() const { return key_scales.defined(); }
};

class KVCache {
 public:
  // `dtype` is the storage type (float32, bfloat16/float16 to halve it, int8 with row scales;
  // a linear-attention state is float32 whatever it says);
  // attention reads the cached entries in that dtype, in place (kernels/cpu/attention.cpp
  // converts one tile at a time), never as a float32 copy of the prefix.
  KVCache(const AttentionConfig& attention, int64_t layers, int64_t batch, int64_t capacity, DType dtype = DType::f32,
          const Device& device = kCPU);

  int64_t length() const { return length_; }  // positions filled
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  bool stores_values() const { return attention_.pattern().cache_tensors() == 2; }
  DType dtype() const { return dtype_; }
  bool quantized() const { return dtype_ == DType::i8; }
  bool recurrent() const { return attention_.linear; }

  // Writes layer `layer`'s k and v [B, Hk, T, dh] (v ignored when K=V) after the filled
  // positions and returns the keys and values of positions [0, length() + T): views of the
  // cache, in its dtype. K and V are one tensor when tied. Not for an int8 cache, which
  // attention reads through write_at and cache_attention (Attention::forward_cached).
  std::pair<Tensor, Tensor> append(int64_t layer, const Tensor& k, const Tensor& v);
  // Marks T more positions filled, once every layer has appended them.
  void advance(int64_t T);
  // The static decode step (GPT::decode_step): writes layer `layer`'s k and v [B, Hk, T, dh] at
  // the position `start` (one int64) holds, read on the device, and returns the layer's whole
  // cache (every position of its capacity) for cache_attention. length() is not used. An int8
  // cache quantizes the rows first.
  CachedKV write_at(int64_t layer, const Tensor& k, const Tensor& v, const Tensor& start);
  // Linear attention's state and normalizer of layer `layer`, updated in place by its steps.
  std::pair<Tensor, Tensor> linear_state(int64_t layer);
  void reset();  // no position filled (a linear-attention state back to zero)

  // Bytes the cache holds: its tensors' storage (an int8 cache's scales included).
  int64_t bytes() const;
  // Closed form per token of one sequence: (1 if K=V else 2) x Hk x row bytes x layers, a row
  // being w x bytes(dtype), or w + 4 for int8 (its float32 scale); w = dh (+ r, low-rank V).
  static int64_t bytes_per_token(const AttentionConfig& attention, int64_t layers, DType dtype);
  // The part that does not grow with the length, per sequence: linear attention's state,
  // layers x H x (dh^2 + dh) x 4; 0 otherwise.
  static int64_t bytes_per_sequence(const AttentionConfig& attention, int64_t layers);

 private:
  AttentionConfig attention_;
  int64_t batch_, capacity_, length_ = 0;
  DType dtype_;
  std::vector<Tensor> keys_, values_;              // per layer; values_ empty when K=V
  std::vector<Tensor> key_scales_, value_scales_;  // per layer, int8 only
  std::vector<Tensor> states_, normalizers_;       // per layer, linear attention only
};

}  // namespace qkv::nn
