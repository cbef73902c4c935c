#include "autograd/autocast.h"

#include "autograd/op_table.h"
#include "autograd/ops.h"

namespace qkv {
namespace {

thread_local std::optional<DType> t_autocast;

// Float dtypes by width: a kAmpKeep op promotes to the highest rank present.
int float_rank(DType d) { return d == DType::f64 ? 3 : d == DType::f32 ? 2 : 1; }

}  // namespace

std::optional<DType> autocast_dtype() { return t_autocast; }

AutocastGuard::AutocastGuard(std::optional<DType> low) : prev_(t_autocast) {
  check<DTypeError>(!low || kLowFloat.contains(*low),
                    "autocast: the low-precision dtype must be bfloat16 or float16, got ", low ? dtype_name(*low) : "");
  t_autocast = low;
}
AutocastGuard::~AutocastGuard() { t_autocast = prev_; }

namespace autograd {

const char* amp_name(AmpPolicy p) {
  switch (p) {
    case kAmpLow: return "low";
    case kAmpF32: return "fp32";
    case kAmpKeep: return "keep";
    case kAmpNone: return "none";
  }
  return "?";
}

const char* lowp_name(LowPrecision l) {
  switch (l) {
    case kLowWiden: return "widen";
    case kLowCuda: return "cuda";
    case kLowNative: return "native";
    case kLowGemm: return "gemm";
  }
  return "?";
}

std::optional<DType> promoted_dtype(const std::vector<Tensor>& in) {
  std::optional<DType> widest, widest_any;  // among inputs with dimensions / among all
  bool mixed = false;
  auto widen = [](std::optional<DType>& w, DType d) {
    if (!w || float_rank(d) > float_rank(*w)) w = d;
    else if (float_rank(d) == float_rank(*w) && d != *w) w = DType::f32;  // bf16 with f16
  };
  std::optional<DType> first;
  for (const Tensor& t : in) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    if (!first) first = t.dtype();
    mixed |= t.dtype() != *first;
    widen(widest_any, t.dtype());
    if (t.dim() > 0) widen(widest, t.dtype());
  }
  if (!mixed) return std::nullopt;
  return widest ? widest : widest_any;
}

void autocast_inputs(const OpInfo& info, std::vector<Tensor>& in) {
  const std::optional<DType> low = t_autocast;
  if (!low) return;
  switch (info.amp) {
    case kAmpLow:  // float64 stays: it is asked for on purpose
      for (Tensor& t : in)
        if (t.defined() && t.dtype() == DType::f32) t = cast(t, *low);
      return;
    case kAmpF32:
      for (Tensor& t : in)
        if (t.defined() && kLowFloat.contains(t.dtype())) t = cast(t, DType::f32);
      return;
    case kAmpKeep:
      if (const std::optional<DType> to = promoted_dtype(in))
        for (Tensor& t : in)
          if (t.defined() && is_floating(t.dtype()) && t.dtype() != *to) t = cast(t, *to);
      return;
    case kAmpNone: return;
  }
}

}  // namespace autograd
}  // namespace qkv
