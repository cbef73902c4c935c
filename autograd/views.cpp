#include "autograd/views.h"

#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/view.h"

namespace qkv::autograd {
namespace {

constexpr ViewInfo kViews[] = {
    {"reshape", ViewKind::reshape, "reshape to the input shape"},
    {"permute", ViewKind::permute, "inverse permutation"},
    {"slice", ViewKind::slice, "copy into a zero tensor of the input shape"},
    {"expand", ViewKind::expand, "sum over the broadcast dims"},
    {"squeeze", ViewKind::squeeze, "reshape to the input shape"},
    {"unsqueeze", ViewKind::unsqueeze, "reshape to the input shape"},
    {"transfer", ViewKind::transfer, "transfer back to the input device"},
};

struct ViewNode final : Node {
  ViewKind kind;
  ViewArgs args;
  ViewNode(ViewKind k, ViewArgs a) : kind(k), args(std::move(a)) {}
  std::string name() const override { return kViews[size_t(kind)].name; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads, const PendingGrads&) override {
    const Tensor& g = grads[0];
    const TensorMeta& in = inputs[0];
    switch (kind) {
      case ViewKind::reshape:
      case ViewKind::squeeze:
      case ViewKind::unsqueeze: return {g.reshape(in.shape)};
      case ViewKind::permute: {
        std::vector<int64_t> inv(args.dims.size());
        for (size_t i = 0; i < inv.size(); ++i) inv[size_t(args.dims[i])] = int64_t(i);
        return {g.permute(inv)};
      }
      case ViewKind::slice: {
        Tensor full = zeros(in.shape, {in.dtype, in.device});
        raw::copy(raw::slice(full, args.dim, args.start, args.end, args.step), g);
        return {full};
      }
      case ViewKind::expand: return {sum_to(g, in.shape)};
      case ViewKind::transfer: return {g.to(in.device)};
    }
    return {};
  }
};

}  // namespace

std::span<const ViewInfo> view_table() { return kViews; }

Tensor record_view(const Tensor& in, Tensor out, ViewKind kind, ViewArgs args) {
  const Tensor inputs[] = {in};
  if (!any_requires_grad(inputs)) return out;
  auto node = std::make_shared<ViewNode>(kind, std::move(args));
  node->inputs.push_back(TensorMeta::of(in));
  node->outputs.push_back(TensorMeta::of(out));
  node->next.push_back(gradient_edge(in));
  set_history(out, node, 0);
  return out;
}

}  // namespace qkv::autograd
