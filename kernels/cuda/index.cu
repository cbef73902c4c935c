// Gather/scatter CUDA kernels, following kernels/cpu/index.cpp: embedding lookup,
// index_select / index_add along a dim, gather / scatter_add with per-element indices.
// Every index is range-checked where it is read, on the device: a bad one is recorded in the
// device's error record (tensor/cuda/device_errors.cuh) and skipped, and the host raises the CPU
// kernels' IndexError at its next synchronisation, so no check stalls the host. The adds use
// atomicAdd, since indices may repeat, except index_add of floats along dim 0 (the embedding
// backward): positions sorted by index (CUB's stable radix sort), then each output element sums
// its run in position order, so the result is the same bits every run, and the CPU's.
#include <algorithm>
#ifndef QKV_CUDA_EMU  // the emulated device's stand-in comes with its -include (cuda_emu/cub_sort.h)
#include <cub/device/device_radix_sort.cuh>
#endif
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/device_errors.cuh"

namespace qkv::kernels::cuda {
namespace {

using qkv::cuda::device_error_record;
using qkv::cuda::DeviceErrorKind;
using qkv::cuda::DeviceErrorRecord;
using qkv::cuda::report_device_error;

// Where a bad index is reported: the op's name (a string literal) and the device's record.
struct IndexCheck {
  DeviceErrorRecord* record;
  const char* op;
  int64_t limit;
  // Whether v is in [0, limit); records the first bad one (at `position` of the index tensor).
  __device__ bool ok(int64_t v, int64_t position) const {
    if (v >= 0 && v < limit) return true;
    report_device_error(record, DeviceErrorKind::index, op, v, position, limit, 0);
    return false;
  }
  // gather / scatter_add flavour: the message names the dim instead of the position.
  __device__ bool ok_along(int64_t v, int64_t dim) const {
    if (v >= 0 && v < limit) return true;
    report_device_error(record, DeviceErrorKind::index_along, op, v, 0, limit, dim);
    return false;
  }
};

IndexCheck index_check(const Tensor& on, int64_t limit, const char* op) {
  return {device_error_record(on.device().index), op, limit};
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
  IndexCheck check;
  __device__ void operator()(int64_t e) const {
    const int64_t id = int64_t(ids[e / D]);
    out[e] = check.ok(id, e / D) ? w[id * D + e % D] : W(0);
  }
};

// out[o, j, i] = x[o, index[j], i].
template <class W, class I> struct IndexSelectFn {
  const W* x;
  const I* index;
  W* out;
  int64_t n, size, inner;
  IndexCheck check;
  __device__ void operator()(int64_t e) const {
    const int64_t o = e / (n * inner), j = e / inner % n, i = e % inner, at = int64_t(index[j]);
    out[e] = check.ok(at, j) ? x[(o * size + at) * inner + i] : W(0);
  }
};

// out[o, index[j], i] += src[o, j, i].
template <class T, class I> struct IndexAddFn {
  const T* src;
  const I* index;
  T* out;
  int64_t n, size, inner;
  IndexCheck check;
  __device__ void operator()(int64_t e) const {
    const int64_t o = e / (n * inner), j = e / inner % n, i = e % inner, at = int64_t(index[j]);
    if (check.ok(at, j)) atomic_add(out + (o * size + at) * inner + i, src[e]);
  }
};

// out[r, i] += src[j, i] for the positions j with index[j] == r, in increasing j: the positions
// sorted by index, each output element found its run by binary search and summed it alone.
template <class T, class I> struct RunSumFn {
  const T* src;
  const I* sorted_index;
  const int64_t* sorted_pos;
  T* out;
  int64_t n, inner;
  __device__ void operator()(int64_t e) const {
    const int64_t r = e / inner, i = e % inner;
    int64_t lo = 0, hi = n;  // the first position whose index is >= r
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (int64_t(sorted_index[mid]) < r) lo = mid + 1;
      else hi = mid;
    }
    T s = out[e];
    for (int64_t p = lo; p < n && int64_t(sorted_index[p]) == r; ++p) s += src[sorted_pos[p] * inner + i];
    out[e] = s;
  }
};

template <class I> struct CheckIndexFn {
  const I* index;
  IndexCheck check;
  __device__ void operator()(int64_t j) const { (void)check.ok(int64_t(index[j]), j); }
};

struct IotaFn {
  int64_t* out;
  __device__ void operator()(int64_t j) const { out[j] = j; }
};

// index_add along dim 0 of floats, deterministically (RunSumFn); out already holds the input.
template <class T, class I>
void index_add_sorted(const Tensor& out, const Tensor& idx, const Tensor& src, int64_t size, int64_t inner,
                      const IndexCheck& bounds) {
  const int64_t n = idx.numel();
  check<ValueError>(n < int64_t(INT32_MAX), "index_add: ", n, " indices are more than one sort takes");
  const Device dev = src.device();
  launch_flat(n, CheckIndexFn<I>{idx.data<I>(), bounds});  // bad indices match no row: report them
  const Tensor pos = empty({n}, {DType::i64, dev}), sorted_pos = empty({n}, {DType::i64, dev});
  const Tensor sorted_index = empty({n}, {idx.dtype(), dev});
  launch_flat(n, IotaFn{pos.data<int64_t>()});
  size_t temp_bytes = 0;
  const int bits = int(sizeof(I)) * 8;
  QKV_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, idx.data<I>(), sorted_index.data<I>(),
                                                 pos.data<int64_t>(), sorted_pos.data<int64_t>(), int(n), 0, bits,
                                                 launch_stream()));
  const Tensor temp = empty({std::max<int64_t>(1, int64_t(temp_bytes))}, {DType::u8, dev});
  QKV_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, idx.data<I>(), sorted_index.data<I>(),
                                                 pos.data<int64_t>(), sorted_pos.data<int64_t>(), int(n), 0, bits,
                                                 launch_stream()));
  launch_flat(size * inner, RunSumFn<T, I>{src.data<T>(), sorted_index.data<I>(), sorted_pos.data<int64_t>(),
                                           out.data<T>(), n, inner});
}

// Walks index's elements: off[0] is the other tensor's offset with `dim` held at 0, off[1] the
// index element's; e is the element's position in index (and in the contiguous out / src).
template <class T, class I> struct GatherFn {
  const T* x;
  const I* index;
  T* out;
  int64_t dim_stride, dim;
  IndexCheck check;
  __device__ void operator()(const int64_t (&off)[2], int64_t e) const {
    const int64_t at = int64_t(index[off[1]]);
    out[e] = check.ok_along(at, dim) ? x[off[0] + at * dim_stride] : T(0);
  }
};

template <class T, class I> struct ScatterAddFn {
  const T* src;
  const I* index;
  T* out;
  int64_t dim_stride, dim;
  IndexCheck check;
  __device__ void operator()(const int64_t (&off)[2], int64_t e) const {
    const int64_t at = int64_t(index[off[1]]);
    if (check.ok_along(at, dim)) atomic_add(out + off[0] + at * dim_stride, src[e]);
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
    set_device(w);
    visit_bits(w.element_size(), [&]<class W>() {
      launch_flat(k.out[0].numel(),
                  EmbeddingFn<W, I>{static_cast<const W*>(w.raw_data()), ids.data<I>(),
                                    static_cast<W*>(k.out[0].raw_data()), D, index_check(w, V, "embedding")});
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
    set_device(x);
    visit_bits(x.element_size(), [&]<class W>() {
      launch_flat(k.out[0].numel(), IndexSelectFn<W, I>{static_cast<const W*>(x.raw_data()), idx.data<I>(),
                                                        static_cast<W*>(k.out[0].raw_data()), n, A.size, A.inner,
                                                        index_check(x, A.size, "index_select")});
    });
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
      set_device(src);
      if constexpr (std::is_floating_point_v<T>) {
        if (A.outer == 1 && n > 0) {
          index_add_sorted<T, I>(out, idx, src, A.size, A.inner, index_check(src, A.size, op));
          return;
        }
      }
      launch_flat(src.numel(), IndexAddFn<T, I>{src.data<T>(), idx.data<I>(), out.data<T>(), n, A.size, A.inner,
                                                index_check(src, A.size, op)});
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

// Inputs (x, index) -> out[i][j][k] = x[i][index[i][j][k]][k] (dim 1), out shaped like index.
void gather(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "gather").dim;
  const Tensor &x = k.in[0], &index = k.in[1];
  visit_numeric(x.dtype(), "gather", [&]<class T>() {
    visit_index(index.dtype(), "gather", [&]<class I>() {
      set_device(x);
      launch_strided<2>(index.shape(), indexed_strides(x, index, dim),
                        GatherFn<T, I>{static_cast<const T*>(x.raw_data()), static_cast<const I*>(index.raw_data()),
                                       k.out[0].data<T>(), x.strides()[size_t(dim)], dim,
                                       index_check(x, x.shape()[size_t(dim)], "gather")});
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
      set_device(out);
      launch_strided<2>(index.shape(), indexed_strides(out, index, dim),
                        ScatterAddFn<T, I>{src.data<T>(), static_cast<const I*>(index.raw_data()), out.data<T>(),
                                           out.strides()[size_t(dim)], dim,
                                           index_check(out, out.shape()[size_t(dim)], "scatter_add")});
    });
  });
}

}  // namespace qkv::kernels::cuda
