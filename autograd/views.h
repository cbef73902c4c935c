// Differentiable views and transfers: the Tensor methods reshape / permute / slice / expand /
// squeeze / unsqueeze / to(device) share storage (or move it) without a kernel, and leave a
// ViewNode whose backward maps the gradient back to the input's geometry.
#pragma once
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace qkv::autograd {

enum class ViewKind : uint8_t { reshape, permute, slice, expand, squeeze, unsqueeze, transfer };

struct ViewInfo {
  const char* name;
  ViewKind kind;
  const char* backward;  // what the gradient goes through
};
std::span<const ViewInfo> view_table();

// Records `out` (already computed from `in` by a raw view) as a view of `in` when needed.
struct ViewArgs {
  std::vector<int64_t> dims = {};                 // permute order
  int64_t dim = 0, start = 0, end = 0, step = 1;  // slice
};
Tensor record_view(const Tensor& in, Tensor out, ViewKind kind, ViewArgs args = {});

}  // namespace qkv::autograd
