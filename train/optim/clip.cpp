// clip_grad_norm: gathers the defined grads by device and calls the clip_grad_norm op on them
// (kernels/cpu/optim.cpp has the arithmetic).
#include "train/optim/clip.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/view.h"

namespace qkv::optim {
namespace {

// The grads on one device, in parameter order. The op writes contiguous tensors only: a
// non-contiguous grad is clipped through a contiguous copy, written back afterwards.
struct DeviceGrads {
  Device device;
  std::vector<Tensor> grads;
  std::vector<std::pair<Tensor, Tensor>> staged;  // (grad, its contiguous copy)

  Tensor clip(double max_norm, double unscale) {
    Tensor norm = clip_grad_norm_(grads, max_norm, unscale);
    for (auto& [g, copy] : staged) g.copy_(copy);
    return norm;
  }
};

std::vector<DeviceGrads> grads_by_device(const NamedTensors& params) {
  std::vector<DeviceGrads> out;
  for (const auto& entry : params) {
    Tensor g = entry.second.grad();
    if (!g.defined()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const DeviceGrads& d) { return d.device == g.device(); });
    if (it == out.end()) it = out.insert(out.end(), DeviceGrads{g.device(), {}, {}});
    if (!g.is_contiguous()) {
      it->staged.emplace_back(g, raw::contiguous(g));
      g = it->staged.back().second;
    }
    it->grads.push_back(g);
  }
  return out;
}

}  // namespace

Tensor clip_grad_norm(const NamedTensors& params, double max_norm, double unscale) {
  check<ValueError>(!std::isnan(max_norm) && max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  check<ValueError>(unscale > 0 && std::isfinite(unscale) && std::exp2(std::ilogb(unscale)) == unscale,
                    "clip_grad_norm: unscale must be a power of two, got ", unscale);
  NoGradGuard no_grad;
  std::vector<DeviceGrads> devices = grads_by_device(params);
  if (devices.empty()) return scalar_tensor(0.0, {DType::f64, kCPU});
  if (devices.size() == 1) return devices[0].clip(max_norm, unscale);
  // Grads on several devices: unscale and measure each device's grads, combine the norms on the
  // host, then clip each device with the max_norm that gives it the global factor
  // max_norm / (norm + 1e-6).
  std::vector<double> norms;
  double total = 0;
  for (DeviceGrads& d : devices) {
    norms.push_back(d.clip(INFINITY, unscale).item<double>());
    total += norms.back() * norms.back();
  }
  const double norm = std::sqrt(total), factor = max_norm / (norm + 1e-6);
  if (std::isfinite(norm) && factor < 1)
    for (size_t k = 0; k < devices.size(); ++k) devices[k].clip(factor * (norms[k] + 1e-6), 1);
  return scalar_tensor(norm, {DType::f64, kCPU});
}

}  // namespace qkv::optim
