#include "train/loops/host_values.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace qkv::loops {

std::vector<double> read_values(const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  check<ValueError>(!values.empty(), "read_values: nothing to read");
  const Device device = values[0].device();
  std::vector<Tensor> flat;
  for (const Tensor& v : values) {
    check<ShapeError>(v.numel() == 1, "read_values: expected one-element tensors, got shape ", shape_str(v.shape()));
    flat.push_back(cast(v.detach(), DType::f64).reshape({1}).to(device));
  }
  return (flat.size() == 1 ? flat[0] : concat(flat)).to_vector<double>();
}

DeviceSum::DeviceSum(const Device& device) : sum_(zeros({}, {DType::f64, device})) {}

void DeviceSum::add(const Tensor& x, double factor) {
  NoGradGuard no_grad;
  const Tensor v = cast(x.detach(), DType::f64).reshape({});
  sum_ = sum_ + (factor == 1 ? v : v * factor);
}

double DeviceSum::value() const { return sum_.item<double>(); }

}  // namespace qkv::loops
