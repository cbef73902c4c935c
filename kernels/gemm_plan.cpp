// plan_gemm: the decisions of the cuBLASLt matmul (kernels/cuda/matmul.cpp) made on the host as
// plain data (kernels/gemm_plan.h). Each operand is used in place when its last two dims are
// row- or column-contiguous (a transposed view becomes a transpose flag) and its broadcast batch
// dims reduce to a single stride; otherwise it is packed once. A batch of row blocks times one
// shared matrix folds into one taller GEMM.
#include "kernels/gemm_plan.h"

#include <optional>
#include <utility>

namespace qkv::kernels {
namespace {

// The logical matrix op(X) (X or X^T) of every batch, as it lies in memory.
struct Operand {
  int64_t rows = 0, cols = 0;  // of op(X)
  bool row_major = true;       // op(X) row-major with leading dim ld, else column-major
  int64_t ld = 0;
  int64_t batch_stride = 0;  // elements from one batch's matrix to the next (0: broadcast)
  bool packed = false;
  Shape packed_shape;
  int64_t offset = 0;
};

// Reads the last two dims of (shape, strides) as op(X); false when neither stride is unit (or
// the rows or columns overlap), as the CPU kernel decides.
bool classify(Operand& op, const Shape& shape, const Strides& strides, bool trans) {
  const size_t nd = shape.size();
  int64_t rs = strides[nd - 2], cs = strides[nd - 1];
  op.rows = shape[nd - 2];
  op.cols = shape[nd - 1];
  if (trans) {
    std::swap(rs, cs);
    std::swap(op.rows, op.cols);
  }
  if ((cs == 1 || op.cols == 1) && (op.rows == 1 || rs >= op.cols)) {
    op.row_major = true;
    op.ld = op.rows == 1 ? op.cols : rs;
    return true;
  }
  if ((rs == 1 || op.rows == 1) && (op.cols == 1 || cs >= op.rows)) {
    op.row_major = false;
    op.ld = op.cols == 1 ? op.rows : cs;
    return true;
  }
  return false;
}

// The single stride that steps a tensor's matrices through the (broadcast) batch, if there is one.
std::optional<int64_t> single_batch_stride(const Shape& shape, const Strides& strides, const Shape& batch) {
  const Shape bshape(shape.begin(), shape.end() - 2);
  const Strides bst = broadcast_strides(bshape, Strides(strides.begin(), strides.end() - 2), batch);
  std::optional<int64_t> stride;
  int64_t expected = 0;  // what the next outer dim's stride must be
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (stride && bst[d] != expected) return std::nullopt;
    if (!stride) stride = bst[d];
    expected = bst[d] * batch[d];
  }
  return stride.value_or(0);
}

Operand plan_operand(const Tensor& x, bool trans, const Shape& batch) {
  Operand op;
  std::optional<int64_t> stride = single_batch_stride(x.shape(), x.strides(), batch);
  if (stride && classify(op, x.shape(), x.strides(), trans)) {
    op.batch_stride = *stride;
    op.offset = x.offset();
    return op;
  }
  // Pack it: x alone when that keeps a single batch stride (a packed copy of a view with a
  // stride-0 batch dim may not), else x expanded to the full batch. The copy is a fresh
  // contiguous tensor, so its matrices are row-major and start at element 0 of its storage.
  op.packed = true;
  if (stride) {
    op.packed_shape = x.shape();
    stride = single_batch_stride(op.packed_shape, contiguous_strides(op.packed_shape), batch);
  }
  if (!stride) {
    op.packed_shape = batch;
    op.packed_shape.push_back(x.shape()[size_t(x.dim() - 2)]);
    op.packed_shape.push_back(x.shape()[size_t(x.dim() - 1)]);
    stride = single_batch_stride(op.packed_shape, contiguous_strides(op.packed_shape), batch);
  }
  const bool ok = classify(op, op.packed_shape, contiguous_strides(op.packed_shape), trans);
  check<ValueError>(ok && stride.has_value(), "matmul: internal error: a packed operand of shape ",
                    shape_str(op.packed_shape), " is not a strided batch of matrices");
  op.batch_stride = *stride;
  return op;
}

// x [..., m, k] @ w [k, n] with w shared by all batches and x's rows evenly spaced across
// batches: one GEMM of (batches * m) rows instead of a batched one (the output is [batches*m, n]).
bool fold_batches_into_rows(Operand& a, const Operand& b, int64_t& batches) {
  if (batches <= 1 || b.batch_stride != 0 || !a.row_major) return false;
  if (a.rows == 1) {  // one row per batch: the batch stride becomes the row stride
    if (a.batch_stride < a.cols) return false;
    a.ld = a.batch_stride;
  } else if (a.batch_stride != a.rows * a.ld) {
    return false;
  }
  a.rows *= batches;
  a.batch_stride = 0;
  batches = 1;
  return true;
}

// The column-major layout of the operand's memory: op(X) itself when column-major (cuBLASLt
// must transpose it, as it wants op(X)^T), op(X)^T when row-major (a row-major r x c matrix is
// the column-major c x r one).
GemmMatrix to_cublas(const Operand& op, int64_t batches, size_t elem) {
  GemmMatrix g;
  g.packed = op.packed;
  g.packed_shape = op.packed_shape;
  g.rows = op.row_major ? op.cols : op.rows;
  g.cols = op.row_major ? op.rows : op.cols;
  g.ld = op.ld;
  g.transpose = !op.row_major;
  g.offset = op.offset;
  g.batch_stride = batches > 1 ? op.batch_stride : 0;
  g.align_stride_bytes = g.batch_stride * int64_t(elem);
  return g;
}

}  // namespace

GemmPlan plan_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b) {
  GemmPlan plan;
  plan.dtype = out.dtype();
  if (out.numel() == 0) return plan;
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  if (k == 0) {  // empty inner dim: the sum of nothing
    plan.kind = GemmKind::zero_fill;
    return plan;
  }
  int64_t batches = numel(batch);
  check<ValueError>(batches <= INT32_MAX, "matmul: ", batches, " batches is more than cuBLASLt takes");
  check<ValueError>(out.is_contiguous(), "matmul: the output ", shape_str(out.shape()), " must be contiguous");
  Operand pa = plan_operand(a, trans_a, batch);
  const Operand pb = plan_operand(b, trans_b, batch);
  plan.folded = fold_batches_into_rows(pa, pb, batches);

  plan.kind = GemmKind::gemm;
  plan.m = pa.rows;
  plan.n = pb.cols;
  plan.k = pa.cols;
  plan.batch_count = batches;
  const size_t elem = dtype_size(out.dtype());
  plan.a = to_cublas(pa, batches, elem);
  plan.b = to_cublas(pb, batches, elem);
  // out itself: row-major m x n (so column-major n x m, untransposed), batches m * n apart.
  Operand c;
  c.rows = plan.m;
  c.cols = plan.n;
  c.ld = plan.n;
  c.batch_stride = plan.m * plan.n;
  c.offset = out.offset();
  plan.c = to_cublas(c, batches, elem);
  return plan;
}

uint32_t gemm_alignment(uint64_t address, int64_t batch_stride_bytes) {
  const uint64_t bits = address | 256u | uint64_t(batch_stride_bytes);
  return uint32_t(bits & (~bits + 1));
}

}  // namespace qkv::kernels
