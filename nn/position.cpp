#include "nn/position.h"

#include <cmath>

namespace qkv::nn {
namespace {
double sinusoid(int64_t pos, int64_t c, int64_t dim) {
  const double freq = std::pow(10000.0, -double(c / 2 * 2) / double(dim));
  return c % 2 == 0 ? std::sin(double(pos) * freq) : std::cos(double(pos) * freq);
}
}  // namespace

Tensor sinusoidal_table(int64_t positions, int64_t dim) {
  check<ValueError>(positions >= 0 && dim > 0, "sinusoidal_table: invalid size ", positions, " x ", dim);
  std::vector<float> v(static_cast<size_t>(positions * dim));
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t c = 0; c < dim; ++c) v[size_t(p * dim + c)] = float(sinusoid(p, c, dim));
  return from_vector(v, {positions, dim});
}

Tensor pos2d_table(int64_t n, int64_t m) {
  check<ValueError>(m > 0 && m % 2 == 0, "pos2d_table: the channel count m must be even and positive, got ", m);
  const int64_t half = m / 2;
  std::vector<float> v(static_cast<size_t>(n * n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < half; ++c) {
        v[size_t((i * n + j) * m + c)] = float(sinusoid(i, c, half));
        v[size_t((i * n + j) * m + half + c)] = float(sinusoid(j, c, half));
      }
  return from_vector(v, {n, n, m});
}

}  // namespace qkv::nn
