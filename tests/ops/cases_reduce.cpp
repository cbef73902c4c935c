// Test cases for the reductions: single and multiple dims, keepdim, all dims, 0-dim input.
#include <limits>

#include "tests/ops/references.h"

namespace qkv::test {
namespace {

std::vector<Sample> reduce_samples() {
  return {{"last dim", {real({3, 5})}, ReduceAttrs{{1}, false}},
          {"first dim keepdim", {real({4, 3})}, ReduceAttrs{{0}, true}},
          {"middle dims", {real({2, 3, 4, 2})}, ReduceAttrs{{1, 2}, false}},
          {"split dims", {real({2, 3, 4})}, ReduceAttrs{{0, 2}, true}},
          {"all dims", {real({3, 4})}, ReduceAttrs{{0, 1}, false}},
          {"0-dim", {real({})}, ReduceAttrs{{}, false}}};
}

// Reductions long enough for the CUDA kernels' split paths: column reductions narrow enough
// that row chunks fold into partial results, then the partials reduce per column; and few long
// rows cut into pieces, then each row's partials reduced.
std::vector<Sample> split_samples() {
  return {{"rows split: 3 rows of 20000", {real({3, 20000})}, ReduceAttrs{{1}, false}, false},
          kernel_path({"columns split, dim 0", {real({1000, 40})}, ReduceAttrs{{0}, false}}),
          {"columns split, dims 0-1", {real({40, 50, 33})}, ReduceAttrs{{0, 1}, false}, false},
          {"columns split, middle dim", {real({3, 400, 20})}, ReduceAttrs{{1}, true}, false}};
}

std::vector<Sample> with_split_samples(std::vector<Sample> s) {
  for (Sample& c : split_samples()) s.push_back(std::move(c));
  return s;
}

// Folds each reduced group with `fold` from `init`, then `finish(acc, count)`.
template <class Fold, class Finish> Reference reduce_reference(double init, Fold fold, Finish finish) {
  return [=](const std::vector<Ref>& in, const Attrs& a) {
    const auto& r = std::get<ReduceAttrs>(a);
    Ref acc(reduced_shape(in[0].shape, r.dims, r.keepdim), init);
    Ref count(acc.shape, 0);
    for_each_index(in[0].shape, [&](const std::vector<int64_t>& i) {
      auto o = reduced_index(i, r.dims, r.keepdim);
      acc.at(o) = fold(acc.at(o), in[0].at(i));
      count.at(o) += 1;
    });
    for (size_t k = 0; k < acc.v.size(); ++k) acc.v[k] = finish(acc.v[k], count.v[k]);
    return std::vector<Ref>{acc};
  };
}

}  // namespace

OpCase case_sum() {
  OpCase c;
  c.samples = with_split_samples(reduce_samples());
  c.samples.push_back({"int64", {index({3, 4}, 50)}, ReduceAttrs{{1}, false}});
  c.samples.push_back({"int64 columns split", {index({600, 24}, 1000)}, ReduceAttrs{{0}, false}, false});
  c.reference = reduce_reference(
      0, [](double a, double x) { return a + x; }, [](double a, double) { return a; });
  return c;
}

OpCase case_mean() {
  OpCase c;
  c.samples = with_split_samples(reduce_samples());
  c.reference = reduce_reference(
      0, [](double a, double x) { return a + x; }, [](double a, double n) { return a / n; });
  return c;
}

OpCase case_amax() {
  OpCase c;
  c.samples = with_split_samples(reduce_samples());
  c.samples.push_back({"int64", {index({3, 4}, 50)}, ReduceAttrs{{0}, false}});
  c.samples.push_back({"int64 columns split", {index({600, 24}, 1000)}, ReduceAttrs{{0}, false}, false});
  c.reference = reduce_reference(
      -std::numeric_limits<double>::infinity(), [](double a, double x) { return std::max(a, x); },
      [](double a, double) { return a; });
  return c;
}

OpCase case_max() {
  OpCase c;
  c.samples = {{"last dim", {real({3, 5})}, DimAttrs{1, false}},
               {"first dim keepdim", {real({4, 3})}, DimAttrs{0, true}},
               {"middle dim", {real({2, 5, 3})}, DimAttrs{1, false}},
               {"int64 with ties", {index({4, 6}, 3)}, DimAttrs{1, false}}};
  c.reference = [](const std::vector<Ref>& in, const Attrs& a) {
    const auto& d = std::get<DimAttrs>(a);
    const std::vector<int64_t> dims{d.dim};
    Ref val(reduced_shape(in[0].shape, dims, d.keepdim), -std::numeric_limits<double>::infinity());
    Ref idx(val.shape, -1);
    for_each_index(in[0].shape, [&](const std::vector<int64_t>& i) {
      auto o = reduced_index(i, dims, d.keepdim);
      if (in[0].at(i) > val.at(o)) {  // strictly greater: the first maximum wins
        val.at(o) = in[0].at(i);
        idx.at(o) = double(i[size_t(d.dim)]);
      }
    });
    return std::vector<Ref>{val, idx};
  };
  return c;
}

}  // namespace qkv::test
