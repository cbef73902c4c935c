// Reductions over any set of dims. The input is seen as [outer, reduced, inner]
// (kernels/layout.h); rows reduce with Eigen's vectorized sums, columns accumulate whole rows
// at a time.
#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/loops.h"
#include "kernels/layout.h"

namespace qkv::kernels::cpu {
namespace {

// out[o, i] = finish(fold over r of x[o, r, i]); Row handles inner == 1, Col the general case.
template <class T, class RowFn, class ColFn>
void reduce_into(const Tensor& out, const ReduceLayout& L, RowFn row_fn, ColFn col_fn) {
  const T* x = static_cast<const T*>(L.x.raw_data());
  T* o = static_cast<T*>(out.raw_data());
  const int64_t O = L.outer, R = L.reduced, I = L.inner;
  const bool par = O * R * I >= kParallelGrain;
  if (I == 1) {
#pragma omp parallel for schedule(static) if (par && O > 1)
    for (int64_t i = 0; i < O; ++i) o[i] = row_fn(ConstArrMap<T>(x + i * R, R));
    return;
  }
  // Split the inner axis into chunks so one outer slice still spreads over threads.
  const int64_t chunk = 256;
  const int64_t nchunks = (I + chunk - 1) / chunk;
#pragma omp parallel for collapse(2) schedule(static) if (par)
  for (int64_t oi = 0; oi < O; ++oi)
    for (int64_t c = 0; c < nchunks; ++c) {
      const int64_t i0 = c * chunk, n = std::min(chunk, I - i0);
      col_fn(x + oi * R * I + i0, R, I, n, o + oi * I + i0);
    }
}

template <class T> void sum_into(const Tensor& out, const ReduceLayout& L, double scale) {
  reduce_into<T>(
      out, L, [scale](const auto& row) { return T(row.template cast<double>().sum() * scale); },
      [scale](const T* x, int64_t R, int64_t I, int64_t n, T* o) {
        Arr<double> acc = Arr<double>::Zero(n);  // double accumulators: sums over many rows
        for (int64_t r = 0; r < R; ++r) acc += ConstArrMap<T>(x + r * I, n).template cast<double>();
        ArrMap<T>(o, n) = (acc * scale).template cast<T>();
      });
}

template <class T> T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a > b ? a : b;
}

}  // namespace

void sum(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "sum");
  ReduceLayout L = reduce_layout(k.in[0], a.dims);
  visit_numeric(k.in[0].dtype(), "sum", [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      sum_into<T>(k.out[0], L, 1.0);
    } else {  // exact integer sums
      reduce_into<T>(
          k.out[0], L, [](const auto& row) { return row.sum(); },
          [](const T* x, int64_t R, int64_t I, int64_t n, T* o) {
            ArrMap<T> acc(o, n);
            acc.setZero();
            for (int64_t r = 0; r < R; ++r) acc += ConstArrMap<T>(x + r * I, n);
          });
    }
  });
}

void mean(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "mean");
  ReduceLayout L = reduce_layout(k.in[0], a.dims);
  visit_float(k.in[0].dtype(), "mean",
              [&]<class T>() { sum_into<T>(k.out[0], L, L.reduced ? 1.0 / double(L.reduced) : std::nan("")); });
}

void amax(const KernelArgs& k) {
  const auto& a = attr<ReduceAttrs>(k.attrs, "amax");
  ReduceLayout L = reduce_layout(k.in[0], a.dims);
  check_reducible(L, "amax", k.in[0]);
  visit_numeric(k.in[0].dtype(), "amax", [&]<class T>() {
    reduce_into<T>(
        k.out[0], L,
        [](const auto& row) {
          if constexpr (std::is_floating_point_v<T>) return row.template maxCoeff<Eigen::PropagateNaN>();
          else return row.maxCoeff();
        },
        [](const T* x, int64_t R, int64_t I, int64_t n, T* o) {
          for (int64_t i = 0; i < n; ++i) o[i] = x[i];
          for (int64_t r = 1; r < R; ++r)
            for (int64_t i = 0; i < n; ++i) o[i] = nan_max(o[i], x[r * I + i]);
        });
  });
}

// Outputs (values, indices): the maximum along one dim and where it first occurs.
void max(const KernelArgs& k) {
  const int64_t dim = attr<DimAttrs>(k.attrs, "max").dim;
  ReduceLayout L = reduce_layout(k.in[0], {dim});
  check_reducible(L, "max", k.in[0]);
  visit_numeric(k.in[0].dtype(), "max", [&]<class T>() {
    const T* x = static_cast<const T*>(L.x.raw_data());
    T* v = k.out[0].data<T>();
    int64_t* idx = k.out[1].data<int64_t>();
    const int64_t O = L.outer, R = L.reduced, I = L.inner;
#pragma omp parallel for collapse(2) schedule(static) if (O * R * I >= kParallelGrain)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i) {
        const T* p = x + o * R * I + i;
        T best = p[0];
        int64_t at = 0;
        for (int64_t r = 1; r < R; ++r) {
          T y = p[r * I];
          bool nan_best = false;
          if constexpr (std::is_floating_point_v<T>) nan_best = std::isnan(best);
          if (!nan_best && (y > best || (std::is_floating_point_v<T> && y != y))) {
            best = y;
            at = r;
          }
        }
        v[o * I + i] = best;
        idx[o * I + i] = at;
      }
  });
}

}  // namespace qkv::kernels::cpu
