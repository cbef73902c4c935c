#include "autograd/grad_hooks.h"

#include <unordered_map>

#include "autograd/shape_rules.h"

namespace qkv::autograd {
namespace {
// Keyed by the leaf's TensorImpl; few entries (one per parameter of a data-parallel model).
std::unordered_map<const TensorImpl*, std::function<void()>>& hooks() {
  static std::unordered_map<const TensorImpl*, std::function<void()>> h;
  return h;
}
}  // namespace

GradHookHandle& GradHookHandle::operator=(GradHookHandle&& o) noexcept {
  if (this != &o) {
    if (leaf_) hooks().erase(leaf_);
    leaf_ = o.leaf_;
    o.leaf_ = nullptr;
  }
  return *this;
}

GradHookHandle::~GradHookHandle() {
  if (leaf_) hooks().erase(leaf_);
}

GradHookHandle add_post_accumulate_grad_hook(const Tensor& leaf, std::function<void()> hook) {
  check<AutogradError>(leaf.requires_grad() && !leaf.impl().autograd->grad_fn,
                       "add_post_accumulate_grad_hook: expected a leaf that requires grad, got ", describe(leaf));
  hooks()[&leaf.impl()] = std::move(hook);
  return GradHookHandle(&leaf.impl());
}

void run_post_accumulate_grad_hook(const TensorImpl* leaf) {
  if (hooks().empty()) return;
  if (auto it = hooks().find(leaf); it != hooks().end()) it->second();
}

}  // namespace qkv::autograd
