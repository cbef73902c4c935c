#include "nn/kv_cache.h"

#include "autograd/grad_mode.h"

namespace qkv::nn {

KVCache::KVCache(const AttentionConfig& a, int64_t layers, int64_t batch, int64_t capacity, DType dtype,
                 const Device& device)
    : attention_(a), batch_(batch), capacity_(capacity), dtype_(dtype) {
  a.validate();
  check<ValueError>(layers > 0 && batch > 0 && capacity > 0, "kv cache: layers ", layers, ", batch ", batch,
                    " and capacity ", capacity, " must be positive");
  check<ValueError>(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
                    "kv cache: storage dtype must be float32, bfloat16 or float16, got ", dtype_name(dtype));
  const Shape shape{batch, a.kv_head_count(), capacity, a.head_dim()};
  for (int64_t l = 0; l < layers; ++l) {
    keys_.push_back(empty(shape, TensorOptions(dtype, device)));
    if (stores_values()) values_.push_back(empty(shape, TensorOptions(dtype, device)));
  }
}

std::pair<Tensor, Tensor> KVCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  check<IndexError>(layer >= 0 && layer < int64_t(keys_.size()), "kv cache: layer ", layer, " of ", keys_.size());
  const int64_t T = k.size(2);
  check<ValueError>(length_ + T <= capacity_, "kv cache: ", length_, " cached + ", T,
                    " new positions exceed its capacity ", capacity_, " (the model's context)");
  check<ShapeError>(k.dim() == 4 && k.size(0) == batch_ && k.size(1) == keys_[0].size(1) &&
                        k.size(3) == keys_[0].size(3),
                    "kv cache: expected keys [", batch_, ", ", keys_[0].size(1), ", T, ", keys_[0].size(3), "], got ",
                    shape_str(k.shape()));
  NoGradGuard no_grad;
  auto store = [&](const Tensor& cache, const Tensor& x) {
    cache.narrow(2, length_, T).copy_(x);  // rounded to the cache's dtype
    return cache.narrow(2, 0, length_ + T);
  };
  Tensor keys = store(keys_[size_t(layer)], k);
  Tensor values = stores_values() ? store(values_[size_t(layer)], v) : keys;
  return {keys, values};
}

std::pair<Tensor, Tensor> KVCache::write_at(int64_t layer, const Tensor& k, const Tensor& v, const Tensor& start) {
  check<IndexError>(layer >= 0 && layer < int64_t(keys_.size()), "kv cache: layer ", layer, " of ", keys_.size());
  NoGradGuard no_grad;
  kv_write_(keys_[size_t(layer)], k.to(dtype_), start);  // rounded to the cache's dtype
  if (!stores_values()) return {keys_[size_t(layer)], keys_[size_t(layer)]};
  kv_write_(values_[size_t(layer)], v.to(dtype_), start);
  return {keys_[size_t(layer)], values_[size_t(layer)]};
}

void KVCache::advance(int64_t T) {
  check<ValueError>(T >= 0 && length_ + T <= capacity_, "kv cache: cannot advance ", length_, " by ", T,
                    " past its capacity ", capacity_);
  length_ += T;
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (const auto& t : keys_) total += t.numel() * int64_t(dtype_size(t.dtype()));
  for (const auto& t : values_) total += t.numel() * int64_t(dtype_size(t.dtype()));
  return total;
}

int64_t KVCache::bytes_per_token(const AttentionConfig& a, int64_t layers, DType dtype) {
  return a.pattern().cache_tensors() * a.kv_head_count() * a.head_dim() * int64_t(dtype_size(dtype)) * layers;
}

}  // namespace qkv::nn
