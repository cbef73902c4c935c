// Gather/scatter kernels: embedding lookup, index_select / index_add along a dim, gather /
// scatter_add with per-element indices. Every index is range-checked; a bad one raises
// IndexError naming the op, the index and the valid range.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "kernels/index_checks.h"
#include "kernels/layout.h"

namespace qkv::kernels::cpu {

// Inputs (weight [V, D], ids [...]) -> out [..., D].
void embedding(const KernelArgs& k) {
  const Tensor w = raw::contiguous(k.in[0]);
  const Tensor ids = raw::contiguous(k.in[1]);
  const int64_t V = w.shape()[0], D = w.shape()[1], n = ids.numel();
  const size_t row_bytes = size_t(D) * w.element_size();
  visit_index(ids.dtype(), "embedding", [&]<class I>() {
    const I* id = ids.data<I>();
    check_indices(id, n, V, "embedding");
    const char* src = static_cast<const char*>(w.raw_data());
    char* dst = static_cast<char*>(k.out[0].raw_data());
#pragma omp parallel for schedule(static) if (n * D >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + size_t(i) * row_bytes, src + size_t(id[i]) * row_bytes, row_bytes);
  });
}

// Inputs (x, index [n]) -> out: x with dim `dim` replaced by x[..., index, ...].
void index_select(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "index_select").dim;
  const Tensor x = raw::contiguous(k.in[0]);
  const Tensor idx = raw::contiguous(k.in[1]);
  const Around A(x.shape(), dim);
  const int64_t n = idx.numel();
  const size_t es = x.element_size(), row = size_t(A.inner) * es;
  visit_index(idx.dtype(), "index_select", [&]<class I>() {
    const I* ip = idx.data<I>();
    check_indices(ip, n, A.size, "index_select");
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(k.out[0].raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (A.outer * n * A.inner >= kParallelGrain)
    for (int64_t o = 0; o < A.outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + size_t(o * n + j) * row, src + size_t(o * A.size + int64_t(ip[j])) * row, row);
  });
}

namespace {

// out[..., index[j], ...] += src[..., j, ...] along `dim`, in place.
void add_indexed_rows(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& source, const char* op) {
  const Tensor idx = raw::contiguous(index);
  const Tensor src = raw::contiguous(source);
  const Around A(out.shape(), dim);
  const int64_t n = idx.numel();
  visit_numeric(src.dtype(), op, [&]<class T>() {
    visit_index(idx.dtype(), op, [&]<class I>() {
      const I* ip = idx.data<I>();
      check_indices(ip, n, A.size, op);
      const T* s = src.data<T>();
      T* o = out.data<T>();
      // Rows of the same outer slice may repeat an index, so parallelize over outer and inner.
      const int64_t chunk = 512, nchunks = (A.inner + chunk - 1) / chunk;
#pragma omp parallel for collapse(2) schedule(static) if (A.outer * n * A.inner >= kParallelGrain)
      for (int64_t oo = 0; oo < A.outer; ++oo)
        for (int64_t c = 0; c < nchunks; ++c) {
          const int64_t i0 = c * chunk, len = std::min(chunk, A.inner - i0);
          for (int64_t j = 0; j < n; ++j)
            ArrMap<T>(o + (oo * A.size + int64_t(ip[j])) * A.inner + i0, len) +=
                ConstArrMap<T>(s + (oo * n + j) * A.inner + i0, len);
        }
    });
  });
}

}  // namespace

// Inputs (base, index [n], src) -> out = base; out[..., index[j], ...] += src[..., j, ...].
void index_add(const KernelArgs& k) {
  raw::copy(k.out[0], k.in[0]);
  add_indexed_rows(k.out[0], attr<DimAttrs>(k.attrs, "index_add").dim, k.in[1], k.in[2], "index_add");
}

// Inputs (base, index [n], src): base[..., index[j], ...] += src[..., j, ...] in place.
void index_accumulate(const KernelArgs& k) {
  add_indexed_rows(k.in[0], attr<DimAttrs>(k.attrs, "index_accumulate").dim, k.in[1], k.in[2], "index_accumulate");
}

namespace {

// Walks every element of `index` with the matching element offsets of `a` (index's shape,
// dim `dim` held at 0) and of `index`; calls f(a_off, index_value, elem_linear).
template <class I, class F>
void walk_indexed(const Tensor& a, const Tensor& index, int64_t dim, const char* op, F&& f) {
  Strides as = a.strides();
  as[size_t(dim)] = 0;
  auto L = make_strided_loop<2>(index.shape(), {as, index.strides()});
  const I* ip = static_cast<const I*>(index.raw_data());
  const int64_t limit = a.shape()[size_t(dim)];
  const auto is = L.inner_strides();
  int64_t linear = 0;
  for_each_row(L, INT64_MAX, [&](const std::array<int64_t, 2>& off, int64_t n) {
    for (int64_t i = 0; i < n; ++i, ++linear) {
      const int64_t v = int64_t(ip[off[1] + i * is[1]]);
      check_index_along(v, limit, dim, op);
      f(off[0] + i * is[0] + v * a.strides()[size_t(dim)], linear);
    }
  });
}

}  // namespace

// Inputs (x, index) -> out[i][j][k] = x[i][index[i][j][k]][k] (dim 1), out shaped like index.
void gather(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "gather").dim;
  const Tensor& x = k.in[0];
  visit_numeric(x.dtype(), "gather", [&]<class T>() {
    visit_index(k.in[1].dtype(), "gather", [&]<class I>() {
      const T* xp = static_cast<const T*>(x.raw_data());
      T* o = k.out[0].data<T>();
      walk_indexed<I>(x, k.in[1], dim, "gather", [&](int64_t xoff, int64_t i) { o[i] = xp[xoff]; });
    });
  });
}

// Inputs (base, index, src) -> out = base; out[i][index[i][j][k]][k] += src[i][j][k] (dim 1).
void scatter_add(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "scatter_add").dim;
  raw::copy(k.out[0], k.in[0]);
  const Tensor src = raw::contiguous(raw::expand(k.in[2], k.in[1].shape()));
  visit_numeric(src.dtype(), "scatter_add", [&]<class T>() {
    visit_index(k.in[1].dtype(), "scatter_add", [&]<class I>() {
      T* o = k.out[0].data<T>();
      const T* s = src.data<T>();
      walk_indexed<I>(k.out[0], k.in[1], dim, "scatter_add", [&](int64_t ooff, int64_t i) { o[ooff] += s[i]; });
    });
  });
}

}  // namespace qkv::kernels::cpu
