#include "nn/module.h"

#include <set>

#include "io/safetensors.h"

namespace qkv::nn {

void Module::register_parameter(const std::string& name, Tensor* slot) {
  check<ValueError>(slot && slot->defined(), "register_parameter: '", name, "' is undefined");
  for (const auto& [n, p] : params_) check<ValueError>(n != name, "register_parameter: '", name, "' registered twice");
  *slot = slot->detach();
  slot->set_requires_grad(true);
  params_.emplace_back(name, slot);
}

void Module::register_buffer(const std::string& name, Tensor* slot) {
  check<ValueError>(slot && slot->defined(), "register_buffer: '", name, "' is undefined");
  for (const auto& [n, p] : buffers_) check<ValueError>(n != name, "register_buffer: '", name, "' registered twice");
  *slot = slot->detach();
  buffers_.emplace_back(name, slot);
}

void Module::register_module(const std::string& name, Module* child) {
  check<ValueError>(child != nullptr, "register_module: '", name, "' is null");
  children_.emplace_back(name, child);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out, bool buffers) const {
  for (const auto& [name, slot] : buffers ? buffers_ : params_) out.emplace_back(prefix + name, slot);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, buffers);
}

NamedTensors Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots, false);
  NamedTensors out;
  for (const auto& [name, slot] : slots) out.emplace_back(name, *slot);
  return out;
}

NamedTensors Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots, true);
  NamedTensors out;
  for (const auto& [name, slot] : slots) out.emplace_back(name, *slot);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

void Module::to(const Device& device) {
  for (bool buffers : {false, true}) {
    std::vector<std::pair<std::string, Tensor*>> slots;
    collect("", slots, buffers);
    for (auto& [name, slot] : slots) {
      if (slot->device() == device) continue;
      *slot = slot->detach().to(device);
      if (!buffers) slot->set_requires_grad(true);
    }
  }
}

void Module::to(DType dtype) {
  check<DTypeError>(is_floating(dtype), "Module::to: ", dtype_name(dtype), " is not a floating dtype");
  for (bool buffers : {false, true}) {
    std::vector<std::pair<std::string, Tensor*>> slots;
    collect("", slots, buffers);
    for (auto& [name, slot] : slots) {
      if (!is_floating(slot->dtype()) || slot->dtype() == dtype) continue;
      *slot = slot->detach().to(dtype);
      if (!buffers) slot->set_requires_grad(true);
    }
  }
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (auto& [name, t] : named_parameters()) out.emplace_back(name, t.detach());
  for (auto& [name, t] : named_buffers()) out.emplace_back(name, t);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", slots, false);
  collect("", slots, true);
  std::set<std::string> used;
  NoGradGuard no_grad;
  for (auto& [name, slot] : slots) {
    auto it = state.find(name);
    if (it == state.end()) {
      check<ValueError>(!strict, "load_state_dict: parameter '", name, "' is missing");
      continue;
    }
    check<ShapeError>(it->second.shape() == slot->shape(), "load_state_dict: parameter '", name, "' has shape ",
                      shape_str(it->second.shape()), " but the model expects ", shape_str(slot->shape()));
    // A checkpoint of another precision is refused rather than silently cast.
    check<DTypeError>(it->second.dtype() == slot->dtype(), "load_state_dict: parameter '", name, "' is ",
                      dtype_name(it->second.dtype()), " but the model's is ", dtype_name(slot->dtype()));
    slot->copy_(it->second);
    used.insert(name);
  }
  if (strict)
    for (const auto& [name, t] : state)
      check<ValueError>(used.count(name) > 0, "load_state_dict: unexpected parameter '", name,
                        "' (not in this model; pass strict=false to ignore it)");
}

void Module::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  safetensors::save(path, state_dict(), metadata);
}

void Module::load(const std::string& path, bool strict) {
  try {
    load_state_dict(safetensors::load(path), strict);
  } catch (const IOError&) { throw; } catch (const Error& e) {
    throw IOError(cat(path, ": ", e.what()));
  }
}

}  // namespace qkv::nn
