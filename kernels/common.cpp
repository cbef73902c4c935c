#include "kernels/common.h"

#include "tensor/view.h"

namespace qkv::kernels::common {

void concat(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "concat").dim;
  int64_t at = 0;
  for (const Tensor& x : k.in) {
    const int64_t n = x.shape()[dim];
    raw::copy(raw::slice(k.out[0], dim, at, at + n, 1), x);
    at += n;
  }
}

void cast(const KernelArgs& k) { raw::copy(k.out[0], k.in[0]); }
void copy(const KernelArgs& k) { raw::copy(k.out[0], k.in[0]); }

}  // namespace qkv::kernels::common
