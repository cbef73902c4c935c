// Decoding one token at a time through GPT::decode_step, whose inputs are fixed tensors on the
// model's device (the ids [B, 1] and the position [1], written before each step). On a CUDA
// device the step is captured once as a CUDA graph (tensor/cuda/graph.h) and then replayed for
// every token: one launch instead of one per kernel, the launch overhead that dominates a small
// model's decode step. On the CPU the same step runs eagerly.
#pragma once
#include <memory>

#include "nn/models/gpt.h"

namespace qkv::cuda {
class CudaGraph;
}

namespace qkv::infer {

class StaticDecoder {
 public:
  // `cache` holds the prompt (prefilled with forward_cached); both must outlive the decoder.
  StaticDecoder(const nn::GPT& model, nn::KVCache& cache);
  ~StaticDecoder();
  // The logits [B, 1, vocab] of `ids` [B, 1] (int64, any device) at `position` (the cache then
  // holds it too): a view of the decoder's output, overwritten by the next step.
  Tensor step(const Tensor& ids, int64_t position);
  // Whether the steps replay a CUDA graph.
  bool graphed() const { return graph_ != nullptr; }

 private:
  const nn::GPT& model_;
  nn::KVCache& cache_;
  Device device_;
  Tensor ids_, position_, logits_;
  std::unique_ptr<cuda::CudaGraph> graph_;
};

}  // namespace qkv::infer
