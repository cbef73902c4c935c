// Gather/scatter CUDA kernels, following kernels/cpu/index.cpp: embedding lookup,
// index_select / index_add along a dim, gather / scatter_add with per-element indices.
// Indices are copied to the host and range-checked there first, raising the CPU kernels'
// IndexError messages; the device code then trusts them. The adds use atomicAdd, since
// indices may repeat.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/index_checks.h"
#include "kernels/layout.h"

namespace qkv::kernels::cuda {
namespace {

// ---- host-side index checks -----------------------------------------------------------------

Tensor host_copy(const Tensor& t) { return raw::to(t, t.dtype(), kCPU); }

template <class I> void check_indices(const Tensor& index, int64_t limit, const char* op) {
  const Tensor h = host_copy(index);
  kernels::check_indices(h.data<I>(), h.numel(), limit, op);
}

// gather / scatter_add flavour of the message; the host copy walks index in logical order,
// as the CPU kernel does, so the same bad index is reported.
template <class I> void check_indices_along(const Tensor& index, int64_t limit, int64_t dim, const char* op) {
  const Tensor h = host_copy(index);
  const I* idx = h.data<I>();
  for (int64_t i = 0, n = h.numel(); i < n; ++i) check_index_along(int64_t(idx[i]), limit, dim, op);
}

// ---- helpers ----------------------------------------------------------------------------------

// Moves elements as unsigned words of their size, so copies work for every dtype.
template <class F> void visit_bits(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    default: return f.template operator()<uint64_t>();
  }
}

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t* p, int32_t v) { atomicAdd(p, v); }
// Two's complement: adding the bit pattern as unsigned gives the signed sum.
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// ---- element functors -------------------------------------------------------------------------

// out[i, d] = w[ids[i], d] for out [n, D].
template <class W, class I> struct EmbeddingFn {
  const W* w;
  const I* ids;
  W* out;
  int64_t D;
  __device__ void operator()(int64_t e) const { out[e] = w[int64_t(ids[e / D]) * D + e % D]; }
};

// out[o, j, i] = x[o, index[j], i].
template <class W, class I> struct IndexSelectFn {
  const W* x;
  const I* index;
  W* out;
  int64_t n, size, inner;
  __device__ void operator()(int64_t e) const {
    const int64_t o = e / (n * inner), j = e / inner % n, i = e % inner;
    out[e] = x[(o * size + int64_t(index[j])) * inner + i];
  }
};

// out[o, index[j], i] += src[o, j, i].
template <class T, class I> struct IndexAddFn {
  const T* src;
  const I* index;
  T* out;
  int64_t n, size, inner;
  __device__ void operator()(int64_t e) const {
    const int64_t o = e / (n * inner), j = e / inner % n, i = e % inner;
    atomic_add(out + (o * size + int64_t(index[j])) * inner + i, src[e]);
  }
};

// Walks index's elements: off[0] is the other tensor's offset with `dim` held at 0, off[1] the
// index element's; e is the element's position in index (and in the contiguous out / src).
template <class T, class I> struct GatherFn {
  const T* x;
  const I* index;
  T* out;
  int64_t dim_stride;
  __device__ void operator()(const int64_t (&off)[2], int64_t e) const {
    out[e] = x[off[0] + int64_t(index[off[1]]) * dim_stride];
  }
};

template <class T, class I> struct ScatterAddFn {
  const T* src;
  const I* index;
  T* out;
  int64_t dim_stride;
  __device__ void operator()(const int64_t (&off)[2], int64_t e) const {
    atomic_add(out + off[0] + int64_t(index[off[1]]) * dim_stride, src[e]);
  }
};

// Strides that walk `index`'s shape over t, with dim `dim` pinned at 0.
std::array<Strides, 2> indexed_strides(const Tensor& t, const Tensor& index, int64_t dim) {
  Strides ts = t.strides();
  ts[size_t(dim)] = 0;
  return {ts, index.strides()};
}

}  // namespace

// Inputs (weight [V, D], ids [...]) -> out [..., D].
void embedding(const KernelArgs& k) {
  const Tensor w = raw::contiguous(k.in[0]);
  const Tensor ids = raw::contiguous(k.in[1]);
  const int64_t V = w.shape()[0], D = w.shape()[1];
  visit_index(ids.dtype(), "embedding", [&]<class I>() {
    check_indices<I>(ids, V, "embedding");
    set_device(w);
    visit_bits(w.element_size(), [&]<class W>() {
      launch_flat(k.out[0].numel(), EmbeddingFn<W, I>{static_cast<const W*>(w.raw_data()), ids.data<I>(),
                                                      static_cast<W*>(k.out[0].raw_data()), D});
    });
  });
}

// Inputs (x, index [n]) -> out: x with dim `dim` replaced by x[..., index, ...].
void index_select(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "index_select").dim;
  const Tensor x = raw::contiguous(k.in[0]);
  const Tensor idx = raw::contiguous(k.in[1]);
  const Around A(x.shape(), dim);
  const int64_t n = idx.numel();
  visit_index(idx.dtype(), "index_select", [&]<class I>() {
    check_indices<I>(idx, A.size, "index_select");
    set_device(x);
    visit_bits(x.element_size(), [&]<class W>() {
      launch_flat(k.out[0].numel(), IndexSelectFn<W, I>{static_cast<const W*>(x.raw_data()), idx.data<I>(),
                                                        static_cast<W*>(k.out[0].raw_data()), n, A.size, A.inner});
    });
  });
}

// Inputs (base, index [n], src) -> out = base; out[..., index[j], ...] += src[..., j, ...].
void index_add(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "index_add").dim;
  raw::copy(k.out[0], k.in[0]);
  const Tensor idx = raw::contiguous(k.in[1]);
  const Tensor src = raw::contiguous(k.in[2]);
  const Around A(k.out[0].shape(), dim);
  const int64_t n = idx.numel();
  visit_numeric(src.dtype(), "index_add", [&]<class T>() {
    visit_index(idx.dtype(), "index_add", [&]<class I>() {
      check_indices<I>(idx, A.size, "index_add");
      set_device(src);
      launch_flat(src.numel(), IndexAddFn<T, I>{src.data<T>(), idx.data<I>(), k.out[0].data<T>(), n, A.size, A.inner});
    });
  });
}

// Inputs (x, index) -> out[i][j][k] = x[i][index[i][j][k]][k] (dim 1), out shaped like index.
void gather(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "gather").dim;
  const Tensor &x = k.in[0], &index = k.in[1];
  visit_numeric(x.dtype(), "gather", [&]<class T>() {
    visit_index(index.dtype(), "gather", [&]<class I>() {
      check_indices_along<I>(index, x.shape()[size_t(dim)], dim, "gather");
      set_device(x);
      launch_strided<2>(index.shape(), indexed_strides(x, index, dim),
                        GatherFn<T, I>{static_cast<const T*>(x.raw_data()), static_cast<const I*>(index.raw_data()),
                                       k.out[0].data<T>(), x.strides()[size_t(dim)]});
    });
  });
}

// Inputs (base, index, src) -> out = base; out[i][index[i][j][k]][k] += src[i][j][k] (dim 1).
void scatter_add(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "scatter_add").dim;
  const Tensor &out = k.out[0], &index = k.in[1];
  raw::copy(out, k.in[0]);
  const Tensor src = raw::contiguous(raw::expand(k.in[2], index.shape()));
  visit_numeric(src.dtype(), "scatter_add", [&]<class T>() {
    visit_index(index.dtype(), "scatter_add", [&]<class I>() {
      check_indices_along<I>(index, out.shape()[size_t(dim)], dim, "scatter_add");
      set_device(out);
      launch_strided<2>(index.shape(), indexed_strides(out, index, dim),
                        ScatterAddFn<T, I>{src.data<T>(), static_cast<const I*>(index.raw_data()), out.data<T>(),
                                           out.strides()[size_t(dim)]});
    });
  });
}

}  // namespace qkv::kernels::cuda
