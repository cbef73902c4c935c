#include "lab/infer/static_decoder.h"

#include "autograd/autograd.h"
#ifdef QKV_HAVE_CUDA
#include "tensor/cuda/graph.h"
#else
namespace qkv::cuda {
class CudaGraph {};  // never made without the CUDA backend
}  // namespace qkv::cuda
#endif

namespace qkv::infer {

StaticDecoder::StaticDecoder(const nn::GPT& model, nn::KVCache& cache)
    : model_(model), cache_(cache), device_(model.wte.weight.device()) {
  ids_ = zeros({cache.batch(), 1}, TensorOptions(DType::i64, device_));
  position_ = zeros({1}, TensorOptions(DType::i64, device_));
}

StaticDecoder::~StaticDecoder() = default;

Tensor StaticDecoder::step(const Tensor& ids, int64_t position) {
  check<ValueError>(position >= 0 && position < cache_.capacity(), "decode: position ", position,
                    " is outside the cache's ", cache_.capacity(), " positions");
  check<ShapeError>(ids.shape() == ids_.shape(), "decode: expected ids ", shape_str(ids_.shape()), ", got ",
                    shape_str(ids.shape()));
  NoGradGuard no_grad;
  ids_.copy_(ids);  // the step's inputs, written before it runs (or replays)
  position_.fill_(double(position));
#ifdef QKV_HAVE_CUDA
  if (device_.is_cuda()) {
    if (!graph_) {
      graph_ = std::make_unique<cuda::CudaGraph>(device_.index);
      graph_->capture([&] { logits_ = model_.decode_step(ids_, position_, cache_); });  // records, runs nothing
    }
    graph_->replay();
    return logits_;
  }
#endif
  logits_ = model_.decode_step(ids_, position_, cache_);
  return logits_;
}

}  // namespace qkv::infer
