// Batched matmul through the GEMM library (oneDNN, library_gemm.h) or Eigen. Each operand's
// matrices are read in place, row-major or column-major depending on which stride is 1 (so
// transposed views and the trans flags cost nothing); only operands with neither unit stride are
// copied. A batch of stacked row blocks times one shared matrix ([B, T, d] activations times a
// weight) runs as one tall GEMM. Many small matrices run one per thread.
//
// x W^T with at most 16 rows of x (decoding) streams W once through skinny_gemm.h. Other
// float32 products of at least kLibraryMinMacs multiply-adds go to the library's sgemm, and
// bfloat16 ones to its bf16 matmul (float32 accumulation) on CPUs with AVX512_BF16; the
// dispatcher widens other low-precision products (the op row's kLowGemm). Without the library
// (or for float64), Eigen runs them: a long-and-thin product (a wide weight, a vocabulary-sized
// output layer, a matrix-vector product in decoding) is split into one slab of output columns or
// rows per thread, a small output with a long inner dim is split along it, and other big ones
// use Eigen's own OpenMP parallelism.
#include <Eigen/Core>
#include <cstring>
#include <omp.h>

#include "kernels/cpu/compose.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/library_gemm.h"
#include "kernels/cpu/skinny_gemm.h"
#include "kernels/layout.h"
#include "tensor/view.h"

namespace qkv::kernels::cpu {
namespace {

using Eigen::Dynamic;
template <class T, int Order>
using MatMap = Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <class T> using OutMap = Eigen::Map<Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>>;

enum class Layout { row_major, col_major, none };

// The logical matrix op(X) of every batch: data, Eigen layout and per-batch offsets.
struct Operand {
  Tensor t;
  int64_t rows = 0, cols = 0;
  Layout layout = Layout::none;
  int64_t outer_stride = 0;
  std::vector<int64_t> batch_offset;
};

// Sets rows/cols/layout from the last two dims of op.t read as op(X) = X or X^T.
void classify(Operand& op, bool trans) {
  const int64_t nd = op.t.dim();
  int64_t rs = op.t.strides()[nd - 2], cs = op.t.strides()[nd - 1];
  op.rows = op.t.shape()[nd - 2];
  op.cols = op.t.shape()[nd - 1];
  if (trans) {
    std::swap(rs, cs);
    std::swap(op.rows, op.cols);
  }
  if ((cs == 1 || op.cols == 1) && (op.rows == 1 || rs >= op.cols)) {
    op.layout = Layout::row_major;
    op.outer_stride = op.rows == 1 ? op.cols : rs;
  } else if ((rs == 1 || op.rows == 1) && (op.cols == 1 || cs >= op.rows)) {
    op.layout = Layout::col_major;
    op.outer_stride = op.cols == 1 ? op.rows : cs;
  } else {
    op.layout = Layout::none;
  }
}

Operand make_operand(const Tensor& t, bool trans, const Shape& batch) {
  Operand op;
  op.t = t;
  classify(op, trans);
  if (op.layout == Layout::none) {  // neither stride is 1: pack it once
    op.t = raw::contiguous(t);
    classify(op, trans);
  }
  // Broadcast batch dims: offsets of each batch's matrix.
  const Tensor& x = op.t;
  Shape bshape(x.shape().begin(), x.shape().end() - 2);
  Strides bst = broadcast_strides(bshape, Strides(x.strides().begin(), x.strides().end() - 2), batch);
  const int64_t nb = numel(batch);
  op.batch_offset.resize(size_t(nb));
  for (int64_t b = 0; b < nb; ++b) {
    int64_t rem = b, off = x.offset();
    for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
      off += (rem % batch[d]) * bst[d];
      rem /= batch[d];
    }
    op.batch_offset[size_t(b)] = off;
  }
  return op;
}

template <class T, class F> void with_map(const Operand& op, int64_t b, F&& f) {
  const T* p = static_cast<const T*>(op.t.storage()->data()) + op.batch_offset[size_t(b)];
  const Eigen::OuterStride<> outer(op.outer_stride);
  if (op.layout == Layout::row_major) f(MatMap<T, Eigen::RowMajor>(p, op.rows, op.cols, outer));
  else f(MatMap<T, Eigen::ColMajor>(p, op.rows, op.cols, outer));
}

template <class T> void gemm_batch(const Operand& a, const Operand& b, T* out, int64_t batch) {
  OutMap<T> c(out + batch * a.rows * b.cols, a.rows, b.cols);
  if (a.cols == 0) {
    c.setZero();
    return;
  }
  with_map<T>(a, batch, [&](const auto& A) { with_map<T>(b, batch, [&](const auto& B) { c.noalias() = A * B; }); });
}

// A small output with a long inner dim (weight gradients: [d, N] x [N, d]) leaves Eigen little
// to split across threads; split the inner dim instead and add the per-thread partial products.
bool wants_split_k(const Operand& a, const Operand& b, int64_t batches, int threads) {
  return batches == 1 && threads > 1 && a.rows * b.cols <= 256 * 256 && a.cols >= 8 * std::max(a.rows, b.cols) &&
         a.cols >= 2048;
}

template <class T> void gemm_split_k(const Operand& a, const Operand& b, T* out, int threads) {
  const int64_t K = a.cols, chunk = (K + threads - 1) / threads;
  std::vector<Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>> partial(static_cast<size_t>(threads));
  with_map<T>(a, 0, [&](const auto& A) {
    with_map<T>(b, 0, [&](const auto& B) {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int t = 0; t < threads; ++t) {
        const int64_t k0 = t * chunk, n = std::min(chunk, K - k0);
        partial[size_t(t)].setZero(a.rows, b.cols);
        if (n > 0) partial[size_t(t)].noalias() = A.middleCols(k0, n) * B.middleRows(k0, n);
      }
    });
  });
  OutMap<T> c(out, a.rows, b.cols);
  c = partial[0];
  for (int t = 1; t < threads; ++t) c += partial[size_t(t)];
}

// When every batch multiplies the same matrix b (a broadcast weight) and a's batches are row
// blocks of one row-major matrix, one after the other, the batches are one GEMM with
// batches x rows rows: b is streamed once instead of once per batch, and the GEMM is taller.
// The output's batches are stacked the same way. Rewrites `a` to that single matrix.
bool fold_batches(Operand& a, const Operand& b, int64_t batches) {
  if (batches < 2 || a.layout != Layout::row_major) return false;
  const int64_t step = a.rows * a.outer_stride;
  for (int64_t i = 1; i < batches; ++i)
    if (b.batch_offset[size_t(i)] != b.batch_offset[0] || a.batch_offset[size_t(i)] != a.batch_offset[0] + i * step)
      return false;
  a.rows *= batches;
  a.batch_offset.resize(1);
  return true;
}

// One product whose output is much longer in one dim than in the other (or a matrix-vector
// product, which Eigen runs on one thread): each thread computes its own slab of output
// columns (or rows) with a serial Eigen product. The threads share nothing and never wait on
// each other, unlike Eigen's parallel GEMM, which synchronizes on shared packed blocks.
bool wants_slabs(const Operand& a, const Operand& b, int64_t batches, int threads) {
  const int64_t M = a.rows, N = b.cols, split = std::max(M, N), other = std::min(M, N);
  return batches == 1 && threads > 1 && double(M) * double(N) * double(a.cols) >= double(1 << 18) &&
         split >= 32 * int64_t(threads) && (other <= 16 || split >= 4 * other);
}

template <class T> void gemm_slabs(const Operand& a, const Operand& b, T* out, int threads) {
  const int64_t M = a.rows, N = b.cols;
  const bool by_cols = N >= M;
  const int64_t split = by_cols ? N : M;
  OutMap<T> c(out, M, N);
  if (a.cols == 0) {
    c.setZero();
    return;
  }
  // Slab edges on multiples of 16 elements (one 64-byte line of float32 output columns).
  auto edge = [&](int t) { return t == threads ? split : (split * t / threads) / 16 * 16; };
  with_map<T>(a, 0, [&](const auto& A) {
    with_map<T>(b, 0, [&](const auto& B) {
#pragma omp parallel for num_threads(threads) schedule(static, 1)
      for (int t = 0; t < threads; ++t) {
        const int64_t s0 = edge(t), n = edge(t + 1) - s0;
        if (n <= 0) continue;
        if (by_cols) c.middleCols(s0, n).noalias() = A * B.middleCols(s0, n);
        else c.middleRows(s0, n).noalias() = A.middleRows(s0, n) * B;
      }
    });
  });
}

// Below this many multiply-adds per product a library call costs more than it saves.
constexpr double kLibraryMinMacs = 32.0 * 32 * 32;
// A product with at most this many rows (or columns) is a matrix-vector product in all but name
// (a decode step's linear layers at batch 1 to 4): streaming the matrix at memory speed is all
// that matters, and Eigen's slabs (one per thread) do that better than the library.
constexpr int64_t kVectorLikeMax = 4;

void zero_fill(const Tensor& out) { std::memset(out.raw_data(), 0, size_t(out.numel()) * out.element_size()); }

// Batch b of an operand as the library reads it.
GemmMatrix gemm_matrix(const Operand& op, int64_t b) {
  const auto* base = static_cast<const std::byte*>(op.t.storage()->data());
  return {base + op.batch_offset[size_t(b)] * dtype_size(op.t.dtype()), op.rows, op.cols, op.outer_stride,
          op.layout == Layout::col_major};
}

// bf16 x bf16 through the library: float32 accumulation, out bf16 or float32 (a composite's
// intermediate, linear.cpp).
void library_bf16_batches(const Operand& a, const Operand& b, const Tensor& out, int64_t nb) {
  auto* o = static_cast<std::byte*>(out.raw_data());
  const int64_t step = a.rows * b.cols * dtype_size(out.dtype());
  if (a.cols == 0) return zero_fill(out);
  for (int64_t i = 0; i < nb; ++i) library_gemm_bf16(gemm_matrix(a, i), gemm_matrix(b, i), o + i * step, out.dtype());
}

// Whether op(a) op(b) is x W^T with few rows of x (a decode step's layers), both read along unit
// strides: skinny_gemm.h streams W once.
bool skinny(const Operand& a, const Operand& b, int64_t nb) {
  return nb == 1 && a.rows <= kSkinnyMaxRows && a.layout == Layout::row_major && b.layout == Layout::col_major &&
         b.cols * a.cols >= (1 << 16);
}

void run_skinny(const Operand& a, const Operand& b, float* c, const float* bias) {
  const auto* ap = static_cast<const float*>(a.t.storage()->data()) + a.batch_offset[0];
  const auto* bp = static_cast<const float*>(b.t.storage()->data()) + b.batch_offset[0];
  skinny_gemm_nt(ap, a.outer_stride, bp, b.outer_stride, c, a.rows, b.cols, a.cols, bias);
}

// Whether the library runs this float32 product (else Eigen does).
bool library_takes_f32(const Operand& a, const Operand& b) {
  const double macs = double(a.rows) * double(a.cols) * double(b.cols);
  return library_sgemm_enabled() && macs >= kLibraryMinMacs && std::min(a.rows, b.cols) > kVectorLikeMax;
}

}  // namespace

bool linear_with_bias_epilogue(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  const DType dt = x.dtype();
  if (!(dt == DType::f32 || (dt == DType::bf16 && library_bf16_gemm_enabled())) || y.dtype() != dt) return false;
  const Operand a = make_operand(x, false, {}), b = make_operand(w, true, {});
  if (a.cols == 0) return false;
  const Tensor bc = raw::contiguous(bias);
  if (dt == DType::f32 && skinny(a, b, 1)) {
    run_skinny(a, b, y.data<float>(), bc.data<float>());
    return true;
  }
  if (dt == DType::f32 && !library_takes_f32(a, b)) return false;
  if (dt == DType::f32) library_sgemm(gemm_matrix(a, 0), gemm_matrix(b, 0), y.data<float>(), bc.data<float>());
  else library_gemm_bf16(gemm_matrix(a, 0), gemm_matrix(b, 0), y.raw_data(), DType::bf16, bc.raw_data(), bc.dtype());
  return true;
}

void matmul(const KernelArgs& k) {
  const auto& at = attr<MatmulAttrs>(k.attrs, "matmul");
  const Tensor& out = k.out[0];
  const DType in_dtype = k.in[0].dtype();  // both inputs' (the shape rule checks)
  // bf16 arrives only where the library computes it (the row's kLowGemm: else the dispatcher
  // widens); its output may be bf16 or a composite's float32 intermediate (linear.cpp).
  const bool bf16 = in_dtype == DType::bf16;
  check<DTypeError>(in_dtype != DType::f16 && (!bf16 || library_bf16_gemm_enabled()),
                    "matmul: internal: the CPU kernel was given ", dtype_name(in_dtype),
                    " operands its GEMM library does not compute (the dispatcher widens them)");
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Operand a = make_operand(k.in[0], at.trans_a, batch);
  Operand b = make_operand(k.in[1], at.trans_b, batch);
  int64_t nb = numel(batch);
  if (out.numel() == 0) return;
  if (fold_batches(a, b, nb)) nb = 1;
  if (bf16) return library_bf16_batches(a, b, out, nb);
  visit_float(out.dtype(), "matmul", [&]<class T>() {
    T* o = out.data<T>();
    const double flops_per = double(a.rows) * double(a.cols) * double(b.cols);
    // Batches side by side when there are enough of them and each is small.
    const bool per_thread = nb >= omp_get_max_threads() && flops_per < 256.0 * 256 * 256;
    const int threads = omp_get_max_threads();
    const bool library = std::is_same_v<T, float> && library_takes_f32(a, b);
    if constexpr (std::is_same_v<T, float>)
      if (a.cols > 0 && skinny(a, b, nb)) return run_skinny(a, b, o, nullptr);
    if (library) {  // never for an empty inner dim: library_takes_f32 asks for kLibraryMinMacs
      // In a parallel region (per_thread, or a caller's) the library runs on the calling thread.
      auto one = [&](int64_t i) {
        library_sgemm(gemm_matrix(a, i), gemm_matrix(b, i), reinterpret_cast<float*>(o) + i * a.rows * b.cols);
      };
      if (per_thread) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t i = 0; i < nb; ++i) one(i);
      } else {
        for (int64_t i = 0; i < nb; ++i) one(i);
      }
    } else if (!omp_in_parallel() && wants_split_k(a, b, nb, threads)) {
      gemm_split_k<T>(a, b, o, threads);
    } else if (!omp_in_parallel() && wants_slabs(a, b, nb, threads)) {
      gemm_slabs<T>(a, b, o, threads);
    } else if (per_thread) {
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t i = 0; i < nb; ++i) gemm_batch<T>(a, b, o, i);
    } else {
      for (int64_t i = 0; i < nb; ++i) gemm_batch<T>(a, b, o, i);
    }
  });
}

// Inputs (c [M, N], a, b; c written) -> c += op(a) op(b): the library's sum post-op where it
// runs this float32 product, else the product into a temporary, then added.
void matmul_accumulate(const KernelArgs& k) {
  const auto& at = attr<MatmulAttrs>(k.attrs, "matmul_accumulate");
  const Tensor &c = k.in[0], &x = k.in[1], &y = k.in[2];
  if (c.numel() == 0) return;
  if (c.dtype() == DType::f32) {  // c is contiguous: the dispatcher refuses a strided written input
    const Operand a = make_operand(x, at.trans_a, {}), b = make_operand(y, at.trans_b, {});
    if (library_takes_f32(a, b)) return library_sgemm_accumulate(gemm_matrix(a, 0), gemm_matrix(b, 0), c.data<float>());
  }
  const Tensor product = empty(c.shape(), {c.dtype(), kCPU});
  run_kernel(matmul, {x, y}, {product}, at);
  run_kernel(add, {c, product}, {c}, NoAttrs{});
}

}  // namespace qkv::kernels::cpu
