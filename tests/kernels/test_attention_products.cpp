// The attention tile products (kernels/cpu/attention_products.h) against float64 products: the
// fixed-width float32 loops (head widths 16, 32, 64) and the Eigen fallback, on full and ragged
// tiles read as row blocks of wider matrices (row stride larger than the width), with alpha.
#include <doctest/doctest.h>

#include <random>
#include <string>

// GCC 12 at the tests' -O1 flags Eigen's AVX-512 float transpose (in the Eigen fallback, width
// 20 below) as reading an uninitialized register: a false positive inside <avx512fintrin.h>.
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/attention_products.h"
#include "tensor/error.h"

using namespace qkv;
using namespace qkv::kernels::cpu::attention_tiles;

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
using Ref = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A rows x width block of a matrix with `pad` extra columns, filled with uniform values.
struct Strided {
  Mat storage;
  int64_t width;
  Strided(int64_t rows, int64_t w, int64_t pad, std::mt19937& rng) : storage(rows, w + pad), width(w) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < storage.size(); ++i) storage.data()[i] = u(rng);
  }
  Map view() { return Map(storage.data(), storage.rows(), width, Eigen::OuterStride<>(storage.cols())); }
  Eigen::Map<const Mat, 0, Eigen::OuterStride<>> view() const {
    return {storage.data(), storage.rows(), width, Eigen::OuterStride<>(storage.cols())};
  }
  Ref exact() const { return view().cast<double>(); }
  Mat pad() const { return storage.rightCols(storage.cols() - width); }
};

// |got - want| <= 1e-5 (1 + |want|) everywhere: float32 sums of at most 64 products of |x| <= 1.
std::string mismatch(const Mat& got, const Ref& want) {
  if (got.rows() != want.rows() || got.cols() != want.cols())
    return cat("shape ", got.rows(), "x", got.cols(), " vs ", want.rows(), "x", want.cols());
  for (int64_t i = 0; i < want.rows(); ++i)
    for (int64_t j = 0; j < want.cols(); ++j)
      if (std::abs(double(got(i, j)) - want(i, j)) > 1e-5 * (1 + std::abs(want(i, j))))
        return cat("(", i, ", ", j, "): ", got(i, j), " vs ", want(i, j));
  return "";
}

}  // namespace

TEST_CASE("attention tile products equal float64 products at fixed and other head widths") {
  std::mt19937 rng(3);
  for (const int64_t width : {16, 32, 64, 20}) {
    for (const auto& [ni, nj] : {std::pair<int64_t, int64_t>{64, 64}, {37, 5}, {3, 61}, {1, 1}}) {
      const std::string what = cat("width ", width, ", ", ni, " x ", nj);
      const float alpha = 0.37f;
      const Strided a(ni, width, 7, rng), b(nj, width, 3, rng);  // scores: a [ni x D], b [nj x D]
      Mat s;
      tile_product_nt(s, a.view(), b.view(), alpha);
      const Ref nt = double(alpha) * a.exact() * b.exact().transpose();
      CHECK_MESSAGE(mismatch(s, nt) == "", what, " a b^T: ", mismatch(s, nt));

      const Strided p(ni, nj, 5, rng), v(nj, width, 9, rng), q(ni, width, 2, rng);
      Strided c(ni, width, 11, rng);  // c += alpha p v, written through its strided view
      const Ref nn = c.exact() + double(alpha) * p.exact() * v.exact();
      const Mat c_pad = c.pad();
      tile_add_nn(c.view(), p.view(), v.view(), alpha);
      CHECK_MESSAGE(mismatch(c.view(), nn) == "", what, " c += a b: ", mismatch(c.view(), nn));
      CHECK(c.pad() == c_pad);  // the columns beyond the view are untouched

      Strided d(nj, width, 4, rng);  // d += alpha p^T q
      const Ref tn = d.exact() + double(alpha) * p.exact().transpose() * q.exact();
      const Mat d_pad = d.pad();
      tile_add_tn(d.view(), p.view(), q.view(), alpha);
      CHECK_MESSAGE(mismatch(d.view(), tn) == "", what, " c += a^T b: ", mismatch(d.view(), tn));
      CHECK(d.pad() == d_pad);
    }
  }
}
