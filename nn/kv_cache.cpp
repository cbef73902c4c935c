#include "nn/kv_cache.h"

#include "autograd/grad_mode.h"

namespace qkv::nn {

KVCache::KVCache(const AttentionConfig& a, int64_t layers, int64_t batch, int64_t capacity, DType dtype,
                 const Device& device)
    : attention_(a), batch_(batch), capacity_(capacity), dtype_(a.linear ? DType::f32 : dtype) {
  a.validate();
  check<ValueError>(layers > 0 && batch > 0 && capacity > 0, "kv cache: layers ", layers, ", batch ", batch,
                    " and capacity ", capacity, " must be positive");
  check<ValueError>(kCacheDTypes.contains(dtype),
                    "kv cache: storage dtype must be float32, bfloat16, float16 or int8, got ", dtype_name(dtype));
  if (a.linear) {
    const int64_t H = a.heads, dh = a.head_dim();
    for (int64_t l = 0; l < layers; ++l) {
      states_.push_back(zeros({batch, H, dh, dh}, device));
      normalizers_.push_back(zeros({batch, H, 1, dh}, device));
    }
    return;
  }
  const Shape shape{batch, a.kv_head_count(), capacity, a.cache_row_width()},
      scale_shape{shape[0], shape[1], shape[2], 1};
  for (int64_t l = 0; l < layers; ++l) {
    keys_.push_back(empty(shape, TensorOptions(dtype, device)));
    if (stores_values()) values_.push_back(empty(shape, TensorOptions(dtype, device)));
    if (!quantized()) continue;
    key_scales_.push_back(empty(scale_shape, TensorOptions(DType::f32, device)));
    if (stores_values()) value_scales_.push_back(empty(scale_shape, TensorOptions(DType::f32, device)));
  }
}

std::pair<Tensor, Tensor> KVCache::linear_state(int64_t layer) {
  check<ValueError>(recurrent(), "kv cache: only a linear-attention cache holds a recurrent state");
  check<IndexError>(layer >= 0 && layer < int64_t(states_.size()), "kv cache: layer ", layer, " of ", states_.size());
  return {states_[size_t(layer)], normalizers_[size_t(layer)]};
}

void KVCache::reset() {
  length_ = 0;
  NoGradGuard no_grad;
  for (const auto* list : {&states_, &normalizers_})
    for (Tensor t : *list) t.fill_(0.0);
}

std::pair<Tensor, Tensor> KVCache::append(int64_t layer, const Tensor& k, const Tensor& v) {
  check<ValueError>(!recurrent(), "kv cache: a linear-attention cache holds a state, not rows");
  check<IndexError>(layer >= 0 && layer < int64_t(keys_.size()), "kv cache: layer ", layer, " of ", keys_.size());
  const int64_t T = k.size(2);
  check<ValueError>(length_ + T <= capacity_, "kv cache: ", length_, " cached + ", T,
                    " new positions exceed its capacity ", capacity_, " (the model's context)");
  check<ValueError>(!quantized(), "kv cache: an int8 cache is written with write_at and read with cache_attention");
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

CachedKV KVCache::write_at(int64_t layer, const Tensor& k, const Tensor& v, const Tensor& start) {
  check<ValueError>(!recurrent(), "kv cache: a linear-attention cache holds a state, not rows");
  check<IndexError>(layer >= 0 && layer < int64_t(keys_.size()), "kv cache: layer ", layer, " of ", keys_.size());
  NoGradGuard no_grad;
  const auto l = size_t(layer);
  // Rows rounded to the cache's dtype, or quantized with their scales.
  auto store = [&](const Tensor& cache, const std::vector<Tensor>& scales, const Tensor& x) {
    if (!quantized()) return kv_write_(cache, x.to(dtype_), start);
    auto [q, scale] = quantize_int8(x);
    kv_write_(cache, q, start);
    kv_write_(scales[l], scale, start);
  };
  store(keys_[l], key_scales_, k);
  CachedKV c{keys_[l], keys_[l], quantized() ? key_scales_[l] : Tensor(), Tensor()};
  if (stores_values()) {
    store(values_[l], value_scales_, v);
    c.values = values_[l];
  }
  c.value_scales = quantized() && stores_values() ? value_scales_[l] : c.key_scales;
  return c;
}

void KVCache::advance(int64_t T) {
  check<ValueError>(T >= 0 && length_ + T <= capacity_, "kv cache: cannot advance ", length_, " by ", T,
                    " past its capacity ", capacity_);
  length_ += T;
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (const auto& t : keys_) total += t.numel() * int64_t(dtype_size(t.dtype()));
  for (const auto* list : {&values_, &key_scales_, &value_scales_, &states_, &normalizers_})
    for (const auto& t : *list) total += t.numel() * int64_t(dtype_size(t.dtype()));
  return total;
}

int64_t KVCache::bytes_per_sequence(const AttentionConfig& a, int64_t layers) {
  if (!a.linear) return 0;
  return layers * a.heads * (a.head_dim() * a.head_dim() + a.head_dim()) * 4;
}

int64_t KVCache::bytes_per_token(const AttentionConfig& a, int64_t layers, DType dtype) {
  if (a.linear) return 0;
  const int64_t row = a.cache_row_width() * int64_t(dtype_size(dtype)) + (dtype == DType::i8 ? 4 : 0);
  return a.pattern().cache_tensors() * a.kv_head_count() * row * layers;
}

}  // namespace qkv::nn
