// Batched matmul on CUDA through cuBLASLt, with the semantics of kernels/cpu/matmul.cpp.
//
// cuBLASLt is column-major, our tensors are row-major: the row-major C [m, n] is read as the
// column-major C^T [n, m], and C^T = op(B)^T op(A)^T is what we ask cuBLASLt for. Each operand
// is used in place when its last two dims are row- or column-contiguous (a transposed view
// becomes a transpose flag); otherwise it is packed once. Broadcast batch dims become strided
// batches (stride 0 for a broadcast operand) when each operand's batch dims reduce to a single
// stride, and are materialized otherwise. float32 computes in CUBLAS_COMPUTE_32F (no TF32) and
// float64 in CUBLAS_COMPUTE_64F. One cuBLASLt handle and workspace per device, made lazily.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "tensor/allocator.h"
#include "tensor/cuda/check.h"
#include "tensor/view.h"

namespace qkv::kernels::cuda {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(cat("matmul: cuBLASLt call ", what, " failed: ", cublasLtGetStatusName(status), " (",
                          cublasLtGetStatusString(status), ")"));
}
#define QKV_CUBLAS_CHECK(expr) check_cublas((expr), #expr)

// ---- per-device handle and workspace ----------------------------------------------------------

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what NVIDIA suggests for Hopper

struct DeviceContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// Created on first use and kept for the life of the process (never destroyed, so no cuBLASLt
// call runs during static destruction, after the CUDA runtime may have shut down).
const DeviceContext& device_context(int device) {
  static std::mutex mu;
  static auto* contexts = new std::map<int, DeviceContext>();
  std::lock_guard<std::mutex> lock(mu);
  DeviceContext& c = (*contexts)[device];
  if (!c.handle) {
    Allocator& alloc = allocator_for(Device(DeviceType::cuda, device));
    void* workspace = alloc.allocate(kWorkspaceBytes);
    cublasLtHandle_t handle = nullptr;
    const cublasStatus_t status = cublasLtCreate(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) alloc.deallocate(workspace, kWorkspaceBytes);
    check_cublas(status, "cublasLtCreate");
    c.workspace = workspace;
    c.handle = handle;
  }
  return c;
}

// ---- RAII for cuBLASLt descriptors -----------------------------------------------------------

struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* p) const { cublasLtMatrixLayoutDestroy(p); }
};
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* p) const { cublasLtMatmulDescDestroy(p); }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Desc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Pref = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter>;

// ---- operands ----------------------------------------------------------------------------------

// The logical matrix op(X) (X or X^T) of every batch, as cuBLASLt will read it.
struct Operand {
  Tensor t;                    // the tensor read (the input, or a packed copy)
  int64_t rows = 0, cols = 0;  // of op(X)
  bool row_major = true;       // op(X) row-major with leading dim ld, else column-major
  int64_t ld = 0;
  int64_t batch_stride = 0;  // elements from one batch's matrix to the next (0: broadcast)
};

// Reads the last two dims of op.t as op(X); false when neither stride is unit (or the rows or
// columns overlap), as the CPU kernel decides.
bool classify(Operand& op, bool trans) {
  const int64_t nd = op.t.dim();
  int64_t rs = op.t.strides()[size_t(nd - 2)], cs = op.t.strides()[size_t(nd - 1)];
  op.rows = op.t.shape()[size_t(nd - 2)];
  op.cols = op.t.shape()[size_t(nd - 1)];
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

// The single stride that steps t's matrices through the (broadcast) batch, if there is one.
std::optional<int64_t> single_batch_stride(const Tensor& t, const Shape& batch) {
  const Shape bshape(t.shape().begin(), t.shape().end() - 2);
  const Strides bst = broadcast_strides(bshape, Strides(t.strides().begin(), t.strides().end() - 2), batch);
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

Operand make_operand(const Tensor& x, bool trans, const Shape& batch) {
  Operand op;
  op.t = x;
  std::optional<int64_t> stride = single_batch_stride(x, batch);
  if (stride && classify(op, trans)) {
    op.batch_stride = *stride;
    return op;
  }
  // Pack it: x alone when that keeps a single batch stride (a packed copy of a view with a
  // stride-0 batch dim may not), else x expanded to the full batch. Packed matrices are
  // row-major, so classify succeeds.
  if (stride) {
    op.t = raw::contiguous(x);
    stride = single_batch_stride(op.t, batch);
  }
  if (!stride) {
    Shape full = batch;
    full.push_back(x.shape()[size_t(x.dim() - 2)]);
    full.push_back(x.shape()[size_t(x.dim() - 1)]);
    op.t = raw::contiguous(raw::expand(x, full));
    stride = single_batch_stride(op.t, batch);
  }
  classify(op, trans);
  op.batch_stride = *stride;
  return op;
}

// x [..., m, k] @ w [k, n] with w shared by all batches and x's rows evenly spaced across
// batches: one GEMM of (batches * m) rows instead of a batched one (the output is [batches*m, n]).
bool fold_batches_into_rows(Operand& a, const Operand& b, int64_t& batches) {
  if (batches <= 1 || b.batch_stride != 0 || !a.row_major) return false;
  if (a.rows == 1) {
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

// ---- the cuBLASLt call -----------------------------------------------------------------------

// The largest power of two (at most 256) dividing the pointer and the batch stride in bytes.
uint32_t alignment(const void* p, int64_t batch_stride_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u | uint64_t(batch_stride_bytes);
  return uint32_t(bits & (~bits + 1));
}

// The column-major layout of op.t's memory: op(X) itself when column-major, op(X)^T when
// row-major (a row-major r x c matrix is the column-major c x r one).
Layout make_layout(cudaDataType type, const Operand& op, int64_t batches) {
  cublasLtMatrixLayout_t raw = nullptr;
  const uint64_t rows = uint64_t(op.row_major ? op.cols : op.rows), cols = uint64_t(op.row_major ? op.rows : op.cols);
  QKV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, op.ld));
  Layout layout(raw);
  if (batches > 1) {
    const int32_t count = int32_t(batches);
    QKV_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    QKV_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &op.batch_stride, sizeof(op.batch_stride)));
  }
  return layout;
}

template <class T> void gemm(const Tensor& out, const Operand& a, const Operand& b, int64_t batches) {
  constexpr bool kF32 = std::is_same_v<T, float>;
  const cudaDataType type = kF32 ? CUDA_R_32F : CUDA_R_64F;
  const int device = out.device().index;
  QKV_CUDA_CHECK(cudaSetDevice(device));
  const DeviceContext& ctx = device_context(device);

  // cuBLASLt's A is our op(B)^T [n, k], its B our op(A)^T [k, m], its D our C^T [n, m].
  // A column-major operand's memory holds op(X), so it needs the transpose; a row-major one
  // already holds op(X)^T.
  cublasLtMatmulDesc_t raw_desc = nullptr;
  QKV_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, kF32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F, type));
  const Desc desc(raw_desc);
  const cublasOperation_t op_a = b.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_b = a.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  QKV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  QKV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));

  const Layout la = make_layout(type, b, batches);
  const Layout lb = make_layout(type, a, batches);
  Operand c;  // C^T: column-major n x m, ld n
  c.rows = b.cols;
  c.cols = a.rows;
  c.row_major = false;
  c.ld = b.cols;
  c.batch_stride = a.rows * b.cols;
  const Layout lc = make_layout(type, c, batches);

  const void* pa = b.t.raw_data();
  const void* pb = a.t.raw_data();
  void* pc = out.raw_data();
  cublasLtMatmulPreference_t raw_pref = nullptr;
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Pref pref(raw_pref);
  const uint64_t ws = kWorkspaceBytes;
  const int64_t es = batches > 1 ? int64_t(sizeof(T)) : 0;  // batch strides only matter with batches
  const uint32_t align_a = alignment(pa, b.batch_stride * es);
  const uint32_t align_b = alignment(pb, a.batch_stride * es);
  const uint32_t align_c = alignment(pc, c.batch_stride * es);
  QKV_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                        sizeof(align_a)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                        sizeof(align_b)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                        sizeof(align_c)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                        sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  QKV_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.handle, raw_desc, la.get(), lb.get(), lc.get(), lc.get(),
                                                  raw_pref, 1, &heuristic, &found));
  check<DeviceError>(found > 0, "matmul: cuBLASLt has no algorithm for ", dtype_name(out.dtype()), " ",
                     shape_str(out.shape()), " (m=", a.rows, ", n=", b.cols, ", k=", a.cols, ", batches=", batches,
                     ")");

  const T alpha = 1, beta = 0;
  QKV_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, raw_desc, &alpha, pa, la.get(), pb, lb.get(), &beta, pc, lc.get(), pc,
                                  lc.get(), &heuristic.algo, ctx.workspace, kWorkspaceBytes, /*stream=*/0));
}

}  // namespace

void matmul(const KernelArgs& k) {
  const auto& at = attr<MatmulAttrs>(k.attrs, "matmul");
  const Tensor& out = k.out[0];
  if (out.numel() == 0) return;
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  Operand a = make_operand(k.in[0], at.trans_a, batch);
  const Operand b = make_operand(k.in[1], at.trans_b, batch);
  if (a.cols == 0) {  // empty inner dim: the sum of nothing
    raw::fill(out, 0.0);
    return;
  }
  int64_t batches = numel(batch);
  check<ValueError>(batches <= INT32_MAX, "matmul: ", batches, " batches is more than cuBLASLt takes");
  fold_batches_into_rows(a, b, batches);
  visit_float(out.dtype(), "matmul", [&]<class T>() { gemm<T>(out, a, b, batches); });
}

}  // namespace qkv::kernels::cuda
