// The cuBLASLt matmul plan (kernels/gemm_plan.h) proved on the CPU: for random shapes and
// strided views, a small interpreter does what cuBLASLt would do with the plan (pack what it
// says, then a column-major batched GEMM that reads and writes memory only through the plan's
// offsets, leading dims, batch strides and ops) and the result must equal a naive row-major
// float64 matmul of the logical operands. Plus the plan properties that matter for speed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm_plan.h"
#include "tensor/view.h"

using namespace qkv;
using namespace qkv::kernels;

namespace {

// ---- the interpreter: what cuBLASLt does with a plan ------------------------------------------

// A typed window on the whole storage of the tensor cuBLASLt reads (or writes).
template <class T> struct Memory {
  T* data;
  int64_t size;  // elements in the storage
  explicit Memory(const Tensor& t)
      : data(static_cast<T*>(t.storage()->data())), size(int64_t(t.storage()->nbytes() / sizeof(T))) {}
  // Element (r, c) of batch i's column-major matrix, as the plan lays it out.
  T& at(const GemmMatrix& m, int64_t i, int64_t r, int64_t c) const {
    const int64_t e = m.offset + i * m.batch_stride + r + c * m.ld;
    if (e < 0 || e >= size)
      throw std::out_of_range("the plan reaches element " + std::to_string(e) + " of " + std::to_string(size));
    return data[e];
  }
  // Element (r, c) of op(matrix): what cuBLASLt multiplies.
  T op_at(const GemmMatrix& m, int64_t i, int64_t r, int64_t c) const {
    return m.transpose ? at(m, i, c, r) : at(m, i, r, c);
  }
};

// The copy the plan asks for: a fresh contiguous tensor holding x broadcast to packed_shape.
Tensor pack(const Tensor& x, const GemmMatrix& m) {
  if (!m.packed) return x;
  Tensor p = empty(m.packed_shape, x.dtype());
  raw::copy(p, x);
  return p;
}

// What cuBLASLt requires of a layout (column-major, leading dim at least the row count).
void check_layout(const GemmMatrix& m, const GemmPlan& p) {
  CHECK(m.rows >= 1);
  CHECK(m.cols >= 1);
  CHECK(m.ld >= m.rows);
  if (p.batch_count == 1) CHECK(m.batch_stride == 0);
  CHECK(m.align_stride_bytes == (p.batch_count > 1 ? m.batch_stride * int64_t(dtype_size(p.dtype)) : 0));
}

// Runs the plan into out (contiguous): D = op(A) op(B) per batch with cuBLASLt's A = our b,
// B = our a and D = out, all read and written through the plan alone.
template <class T> void run_plan(const GemmPlan& p, const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  if (p.kind == GemmKind::nothing) return;
  if (p.kind == GemmKind::zero_fill) return raw::fill(out, 0.0);
  REQUIRE(p.m > 0);
  REQUIRE(p.n > 0);
  REQUIRE(p.k > 0);
  REQUIRE(p.batch_count >= 1);
  for (const GemmMatrix* m : {&p.a, &p.b, &p.c}) check_layout(*m, p);
  CHECK_FALSE(p.c.packed);
  CHECK_FALSE(p.c.transpose);
  auto op_shape = [](const GemmMatrix& m) {
    return m.transpose ? std::pair(m.cols, m.rows) : std::pair(m.rows, m.cols);
  };
  // cuBLASLt's D [n, m] = op(A) [n, k] op(B) [k, m].
  REQUIRE(op_shape(p.c) == std::pair(p.n, p.m));
  REQUIRE(op_shape(p.b) == std::pair(p.n, p.k));
  REQUIRE(op_shape(p.a) == std::pair(p.k, p.m));
  const Tensor a = pack(a_in, p.a), b = pack(b_in, p.b);
  const Memory<T> A(b), B(a), D(out);
  for (int64_t i = 0; i < p.batch_count; ++i)
    for (int64_t r = 0; r < p.n; ++r)
      for (int64_t c = 0; c < p.m; ++c) {
        double s = 0;
        for (int64_t q = 0; q < p.k; ++q) s += double(A.op_at(p.b, i, r, q)) * double(B.op_at(p.a, i, q, c));
        D.at(p.c, i, r, c) = T(s);
      }
}

// ---- the reference: a naive row-major float64 matmul of the logical operands ------------------

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Shape out_shape(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Shape s = broadcast_shapes(batch_of(a), batch_of(b), "test");
  s.push_back(ta ? a.size(-1) : a.size(-2));
  s.push_back(tb ? b.size(-2) : b.size(-1));
  return s;
}

std::vector<double> reference(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const Shape os = out_shape(a, b, ta, tb);
  const Shape batch(os.begin(), os.end() - 2);
  const int64_t M = os[os.size() - 2], N = os.back(), K = ta ? a.size(-2) : a.size(-1), nb = numel(batch);
  auto full = [&](const Tensor& x) {  // x's values broadcast to the whole batch, in logical order
    Shape s = batch;
    s.push_back(x.size(-2));
    s.push_back(x.size(-1));
    return raw::expand(x, s).to_vector<double>();
  };
  const std::vector<double> av = full(a), bv = full(b);
  std::vector<double> y(size_t(nb * M * N));
  for (int64_t t = 0; t < nb; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t q = 0; q < K; ++q)
          s += av[size_t(t * M * K + (ta ? q * M + i : i * K + q))] *
               bv[size_t(t * K * N + (tb ? j * K + q : q * N + j))];
        y[size_t((t * M + i) * N + j)] = s;
      }
  return y;
}

// Plans, interprets and compares; returns the plan for the caller's statistics.
GemmPlan check_against_reference(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Tensor out = empty(out_shape(a, b, ta, tb), a.dtype());
  raw::fill(out, std::numeric_limits<double>::quiet_NaN());  // an element the plan misses stays NaN
  const GemmPlan p = plan_gemm(a, b, out, ta, tb);
  if (a.dtype() == DType::f32) run_plan<float>(p, a, b, out);
  else run_plan<double>(p, a, b, out);
  const std::vector<double> want = reference(a, b, ta, tb), got = out.to_vector<double>();
  REQUIRE(got.size() == want.size());
  const double tol = a.dtype() == DType::f32 ? 1e-5 : 1e-12;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::isnan(got[i]) ? 1e300 : std::fabs(got[i] - want[i]) / (1 + std::fabs(want[i])));
  CHECK(worst <= tol);
  return p;
}

// ---- random strided views ------------------------------------------------------------------------

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); }
  bool coin(double p) { return std::bernoulli_distribution(p)(gen); }
};

Tensor random_values(const Shape& s, DType dt, Rng& rng) {
  std::vector<double> v(size_t(numel(s)));
  for (double& x : v) x = double(rng.uniform(-1000, 1000)) / 500.0;
  return raw::to(from_vector(v, s), dt, kCPU);
}

// A view of logical shape s over a bigger buffer: dims laid out in a random order (transposed
// matrices, permuted batch dims), sliced with random starts and steps (offsets, non-unit leading
// strides and column strides) and some dims expanded from size 1 (stride 0).
Tensor random_view(const Shape& s, DType dt, Rng& rng) {
  const size_t d = s.size();
  Shape base = s;
  for (size_t i = 0; i < d; ++i)
    if (s[i] > 1 && rng.coin(0.1)) base[i] = 1;
  std::vector<int64_t> perm(d);  // physical dim j holds logical dim perm[j]
  std::iota(perm.begin(), perm.end(), 0);
  switch (rng.uniform(0, 5)) {
    case 0:
    case 1: break;
    case 2: std::swap(perm[d - 1], perm[d - 2]); break;
    case 3: std::shuffle(perm.begin(), perm.end() - 2, rng.gen); break;
    default: std::shuffle(perm.begin(), perm.end(), rng.gen);
  }
  const bool sliced = rng.coin(0.4);
  Shape phys(d), start(d), step(d);
  for (size_t j = 0; j < d; ++j) {
    const int64_t n = base[size_t(perm[j])];
    start[j] = sliced && rng.coin(0.3) ? rng.uniform(1, 2) : 0;
    step[j] = sliced && rng.coin(0.3) ? rng.uniform(2, 3) : 1;
    phys[j] = start[j] + n * step[j] + (sliced && rng.coin(0.2) ? 1 : 0);
  }
  Tensor v = random_values(phys, dt, rng);
  for (size_t j = 0; j < d; ++j)
    v = raw::slice(v, int64_t(j), start[j], start[j] + base[size_t(perm[j])] * step[j], step[j]);
  std::vector<int64_t> inv(d);
  for (size_t j = 0; j < d; ++j) inv[size_t(perm[j])] = int64_t(j);
  v = raw::permute(v, inv);
  return base == s ? v : raw::expand(v, s);
}

int64_t random_size(Rng& rng) {
  if (rng.coin(0.03)) return 0;
  if (rng.coin(0.1)) return rng.uniform(7, 19);
  return rng.uniform(1, 6);
}

Shape cat_shape(Shape s, int64_t r, int64_t c) {
  s.push_back(r);
  s.push_back(c);
  return s;
}

// Each operand's batch: a random-length suffix of one batch, some dims replaced by 1.
Shape operand_batch(const Shape& full, Rng& rng) {
  const size_t rank = size_t(rng.uniform(0, int64_t(full.size())));
  Shape s(full.end() - int64_t(rank), full.end());
  for (int64_t& x : s)
    if (rng.coin(0.3)) x = 1;
  return s;
}

// ---- hand-made views for the property checks ----------------------------------------------------

// 0, 1, 2, ... in a contiguous float64 tensor.
Tensor values(const Shape& s) {
  std::vector<double> v(size_t(numel(s)));
  std::iota(v.begin(), v.end(), 0.0);
  return from_vector(v, s);
}

// The plan of op(a) @ op(b), after checking that it computes the product.
GemmPlan plan_of(const Tensor& a, const Tensor& b, bool ta = false, bool tb = false) {
  return check_against_reference(a, b, ta, tb);
}

}  // namespace

TEST_CASE("gemm plan: random shapes and views match a float64 matmul when run as cuBLASLt would") {
  Rng rng(20240611);
  int cases = 0, gemms = 0, folded = 0, batched = 0, broadcast = 0, in_place_transposed = 0, packed = 0,
      packed_expanded = 0, zero_fill = 0, nothing = 0;
  for (int it = 0; it < 10000; ++it) {
    Shape full(size_t(rng.uniform(0, 3)));
    for (int64_t& x : full) x = rng.coin(0.02) ? 0 : rng.uniform(1, 3);
    const Shape ba = operand_batch(full, rng), bb = operand_batch(full, rng);
    int64_t m = random_size(rng), n = random_size(rng), k = random_size(rng);
    if (rng.coin(0.1)) m = 1;  // vector-like products: a row vector, a column vector, an outer product
    if (rng.coin(0.1)) n = 1;
    if (rng.coin(0.05)) k = 1;
    const bool ta = rng.coin(0.5), tb = rng.coin(0.5);
    const DType dt = rng.coin(0.2) ? DType::f32 : DType::f64;
    const Tensor a = random_view(ta ? cat_shape(ba, k, m) : cat_shape(ba, m, k), dt, rng);
    const Tensor b = random_view(tb ? cat_shape(bb, n, k) : cat_shape(bb, k, n), dt, rng);
    CAPTURE(it);
    CAPTURE(shape_str(a.shape()) + " strides " + shape_str(a.strides()) + (ta ? " ^T" : ""));
    CAPTURE(shape_str(b.shape()) + " strides " + shape_str(b.strides()) + (tb ? " ^T" : ""));
    const GemmPlan p = check_against_reference(a, b, ta, tb);
    ++cases;
    nothing += p.kind == GemmKind::nothing;
    zero_fill += p.kind == GemmKind::zero_fill;
    if (p.kind != GemmKind::gemm) continue;
    ++gemms;
    folded += p.folded;
    batched += p.batch_count > 1;
    for (const GemmMatrix* g : {&p.a, &p.b}) {
      broadcast += p.batch_count > 1 && g->batch_stride == 0;
      in_place_transposed += !g->packed && g->transpose;
      packed += g->packed;
      packed_expanded += g->packed && g->packed_shape != (g == &p.a ? a : b).shape();
    }
  }
  MESSAGE(cat(cases, " cases: ", gemms, " GEMMs (", batched, " batched, ", folded, " folded), ", zero_fill,
              " zero fills, ", nothing, " empty; operands: ", broadcast, " stride-0 broadcasts, ", in_place_transposed,
              " transposed in place, ", packed, " packed (", packed_expanded, " expanded to the full batch)"));
  // Every kind of decision was exercised many times.
  for (int count : {folded, batched, broadcast, in_place_transposed, packed, packed_expanded, zero_fill, nothing})
    CHECK(count >= 20);
}

TEST_CASE("gemm plan: a transposed contiguous view or trans flag is read in place with a transpose op") {
  const Tensor a = values({5, 3}), b = values({4, 5});  // op(a) = a^T [3, 5], op(b) = b^T [5, 4]
  for (const GemmPlan& p : {plan_of(raw::permute(a, {1, 0}), raw::permute(b, {1, 0})), plan_of(a, b, true, true)}) {
    REQUIRE(p.kind == GemmKind::gemm);
    CHECK_FALSE(p.a.packed);
    CHECK_FALSE(p.b.packed);
    CHECK(p.a.transpose);  // the memory holds op(a)^T row-major, i.e. op(a) column-major
    CHECK(p.b.transpose);
    CHECK(p.m == 3);
    CHECK(p.n == 4);
    CHECK(p.k == 5);
  }
  const GemmPlan plain = plan_of(values({3, 5}), values({5, 4}));
  CHECK_FALSE(plain.a.transpose);
  CHECK_FALSE(plain.b.transpose);
  CHECK(plain.a.ld == 5);
  CHECK(plain.b.ld == 4);
}

TEST_CASE("gemm plan: a broadcast batch operand is a strided batch with stride 0") {
  // a [M, K] shared by every batch of b [B, K, N]: not folded (a's rows are the shared matrix).
  const GemmPlan p = plan_of(values({3, 4}), values({6, 4, 5}));
  REQUIRE(p.kind == GemmKind::gemm);
  CHECK(p.batch_count == 6);
  CHECK_FALSE(p.folded);
  CHECK_FALSE(p.a.packed);
  CHECK(p.a.batch_stride == 0);
  CHECK(p.b.batch_stride == 20);
  CHECK(p.c.batch_stride == 15);
  // The same with a expanded from [1, M, K] (a stride-0 view).
  const GemmPlan e = plan_of(raw::expand(values({1, 3, 4}), {6, 3, 4}), values({6, 4, 5}));
  CHECK(e.batch_count == 6);
  CHECK_FALSE(e.a.packed);
  CHECK(e.a.batch_stride == 0);
  // Batch [2, 3] with a [2, 1, ...]: a's batch strides (12, 0) are no single stride, so a is
  // materialized to the full batch; b's (60, 20) are one.
  const GemmPlan q = plan_of(values({2, 1, 3, 4}), values({2, 3, 4, 5}));
  CHECK(q.batch_count == 6);
  CHECK(q.a.packed);
  CHECK(q.a.packed_shape == Shape{2, 3, 3, 4});
  CHECK_FALSE(q.b.packed);
}

TEST_CASE("gemm plan: a contiguous batch of row blocks times one shared matrix folds into one GEMM") {
  const GemmPlan p = plan_of(values({4, 3, 5}), values({5, 2}));
  REQUIRE(p.kind == GemmKind::gemm);
  CHECK(p.folded);
  CHECK(p.batch_count == 1);
  CHECK(p.m == 12);
  CHECK_FALSE(p.a.packed);
  CHECK_FALSE(p.b.packed);
  // Also with an expanded weight, and one row per batch spaced out by a slice (ld = batch stride).
  CHECK(plan_of(values({2, 3, 3, 5}), raw::expand(values({5, 2}), {2, 3, 5, 2})).folded);
  const GemmPlan rows = plan_of(raw::slice(values({4, 3, 5}), 1, 1, 2, 1), values({5, 2}));
  CHECK(rows.folded);
  CHECK(rows.a.ld == 15);
  // A transposed activation or a per-batch weight does not fold.
  CHECK_FALSE(plan_of(values({4, 5, 3}), values({5, 2}), true).folded);
  CHECK_FALSE(plan_of(values({4, 3, 5}), values({4, 5, 2})).folded);
}

TEST_CASE("gemm plan: strided rows are read in place and doubly strided matrices are packed") {
  const Tensor wide = values({3, 10});
  const GemmPlan p = plan_of(raw::slice(wide, 1, 2, 7, 1), values({5, 4}));  // rows 10 apart
  CHECK_FALSE(p.a.packed);
  CHECK(p.a.ld == 10);
  CHECK(p.a.offset == 2);
  const GemmPlan q = plan_of(raw::slice(wide, 1, 0, 10, 2), values({5, 4}));  // columns 2 apart
  CHECK(q.a.packed);
  CHECK(q.a.packed_shape == Shape{3, 5});
  CHECK(q.a.offset == 0);
  // Permuted batch dims keep each matrix contiguous but need two strides: materialized.
  const GemmPlan r = plan_of(raw::permute(values({3, 2, 4, 5}), {1, 0, 2, 3}), values({2, 3, 5, 4}));
  CHECK(r.a.packed);
  CHECK(r.a.packed_shape == Shape{2, 3, 4, 5});
}

TEST_CASE("gemm plan: empty outputs do nothing and an empty inner dim fills zeros") {
  CHECK(plan_of(values({0, 3}), values({3, 4})).kind == GemmKind::nothing);
  CHECK(plan_of(values({2, 0, 3}), values({3, 4})).kind == GemmKind::nothing);
  CHECK(plan_of(values({2, 0}), values({0, 4})).kind == GemmKind::zero_fill);
  CHECK(plan_of(values({0, 2}), values({4, 0}), true, true).kind == GemmKind::zero_fill);
}

TEST_CASE("gemm plan: alignment is the largest power of two up to 256 dividing pointer and batch stride") {
  CHECK(gemm_alignment(0x10000, 0) == 256);
  CHECK(gemm_alignment(0x10008, 0) == 8);
  CHECK(gemm_alignment(0x10000, 12) == 4);
  CHECK(gemm_alignment(0x10004, 1024) == 4);
  CHECK(gemm_alignment(0x10000, 4096) == 256);
  Tensor out = empty({4, 3, 2}, DType::f32);
  const GemmPlan p = plan_gemm(raw::to(values({4, 3, 5}), DType::f32, kCPU),
                               raw::to(values({4, 5, 2}), DType::f32, kCPU), out, false, false);
  CHECK(p.a.align_stride_bytes == 60);
  CHECK(p.b.align_stride_bytes == 40);
  CHECK(p.c.align_stride_bytes == 24);
}
