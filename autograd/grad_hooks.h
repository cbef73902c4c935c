// Hooks that run after a backward pass has added into a leaf's .grad (PyTorch's
// register_post_accumulate_grad_hook): data-parallel training starts all-reducing a bucket of
// gradients from them while the rest of the backward still runs. A hook runs on the thread
// that runs the backward, with grad mode off, once per backward that reaches its leaf.
#pragma once
#include <functional>

#include "tensor/tensor.h"

namespace qkv::autograd {

// Removes its hook when destroyed.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  explicit GradHookHandle(const TensorImpl* leaf) : leaf_(leaf) {}
  GradHookHandle(GradHookHandle&& o) noexcept : leaf_(o.leaf_) { o.leaf_ = nullptr; }
  GradHookHandle& operator=(GradHookHandle&& o) noexcept;
  GradHookHandle(const GradHookHandle&) = delete;
  GradHookHandle& operator=(const GradHookHandle&) = delete;
  ~GradHookHandle();

 private:
  const TensorImpl* leaf_ = nullptr;
};

// One hook per leaf (a second replaces the first). `leaf` must require grad and have no grad_fn.
[[nodiscard]] GradHookHandle add_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook);

// Runs the hook of `leaf`, if any (the engine's AccumulateGrad calls it).
void run_post_accumulate_grad_hook(const TensorImpl* leaf);

}  // namespace qkv::autograd
