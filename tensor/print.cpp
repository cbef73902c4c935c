// PyTorch-style printing: nested brackets, aligned columns, "..." past 1000 elements.
#include <cmath>
#include <cstdio>
#include <ostream>

#include "tensor/tensor.h"
#include "tensor/view.h"

namespace qkv {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  const std::vector<double>& v;
  const Shape& shape;
  Strides strides;
  bool summarize, integral, boolean, scientific;
  int width = 0;

  std::string fmt(double x) const {
    char buf[64];
    if (boolean) return x != 0 ? "True" : "False";
    if (integral) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(x));
    else if (std::isnan(x)) std::snprintf(buf, sizeof buf, "nan");
    else if (std::isinf(x)) std::snprintf(buf, sizeof buf, x > 0 ? "inf" : "-inf");
    else std::snprintf(buf, sizeof buf, scientific ? "%.4e" : "%.4f", x);
    return buf;
  }
  void rec(std::ostream& os, size_t d, int64_t base, int indent) const {
    if (d == shape.size()) {
      std::string s = fmt(v[base]);
      os << std::string(width > int(s.size()) ? width - s.size() : 0, ' ') << s;
      return;
    }
    os << "[";
    const int64_t n = shape[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
        i = n - kEdgeItems;
      }
      rec(os, d + 1, base + i * strides[d], indent + 1);
      if (i + 1 < n) {
        if (d + 1 == shape.size()) os << ", ";
        else os << "," << std::string(shape.size() - d - 1, '\n') << std::string(indent + 1, ' ');
      }
    }
    os << "]";
  }
};

}  // namespace

std::string Tensor::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> v = t.to_vector<double>();
  const bool integral = is_integral(t.dtype());
  double amax = 0, amin_nz = INFINITY;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    amax = std::max(amax, std::abs(x));
    if (x != 0) amin_nz = std::min(amin_nz, std::abs(x));
  }
  Printer p{v,
            t.shape(),
            contiguous_strides(t.shape()),
            t.numel() > kSummarizeAbove,
            integral,
            t.dtype() == DType::b8,
            !integral && (amax >= 1e5 || amin_nz < 1e-4)};
  for (double x : v) p.width = std::max(p.width, int(p.fmt(x).size()));
  os << "tensor(";
  if (t.numel() == 0) os << "[]";
  else p.rec(os, 0, 0, 7);
  os << ", shape=" << shape_str(t.shape()) << ", dtype=" << t.dtype() << ", device=" << t.device();
  if (t.requires_grad()) os << ", requires_grad=True";
  return os << ")";
}

}  // namespace qkv
