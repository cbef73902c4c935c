// Batched matmul on CUDA through cuBLASLt, with the semantics of kernels/cpu/matmul.cpp.
//
// Every decision is made on the host by plan_gemm (kernels/gemm_plan.h, checked on the CPU in
// tests/kernels/test_gemm_plan.cpp): which operands are read in place and which are packed
// first, the column-major layouts cuBLASLt is given (the row-major C [m, n] is the column-major
// C^T [n, m] = op(B)^T op(A)^T), the batch strides (0 for a broadcast operand) and folding
// batches into rows. This file executes a plan: it packs what the plan says, then makes one
// cuBLASLt call whose descriptors, layouts and heuristic algorithm are cached per plan key, so
// a repeated shape builds none of them again. float32 computes in CUBLAS_COMPUTE_32F (no TF32),
// float64 in CUBLAS_COMPUTE_64F, and bf16 / f16 on the tensor cores with float32 accumulation
// (CUBLAS_COMPUTE_32F, float scale; the output rounded once). One cuBLASLt handle and workspace
// per device, made lazily. run_gemm (kernels/cuda/gemm.h) adds cuBLASLt's epilogues for
// kernels/cuda/linear.cu: the bias, and the bias gradient. When the heuristic has no algorithm
// for operands as they lie (an alignment or leading dimension it does not take), the product is
// taken again on copies whose rows are 16-byte aligned; only then is it an error.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm_plan.h"
#include "tensor/allocator.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/stream.h"
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

#ifdef QKV_CUDA_EMU
constexpr size_t kWorkspaceBytes = 256;  // the emulated cuBLASLt takes none (cuda_emu/cublaslt.cpp)
#else
constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // what NVIDIA suggests for Hopper
#endif

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
    // Not allocator_for: inside a graph's capture that is the graph's pool, which the
    // process-long workspace would then keep alive after the graph is gone.
    Allocator& alloc = shared_allocator(Device(DeviceType::cuda, device));
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

// ---- cached descriptors -----------------------------------------------------------------------

// What the descriptors, layouts and chosen algorithm depend on: the device, the dtype, the
// batch count, the epilogue and each matrix's layout, op and alignment.
using PlanKey = std::array<int64_t, 22>;  // 7 + 5 per matrix

// The cuBLASLt objects of one plan key, made once and reused by every call with that key. The
// epilogue's vector changes per call: `mu` keeps setting it and enqueueing the call together.
struct CachedGemm {
  Desc desc;
  Layout la, lb, lc;
  cublasLtMatmulAlgo_t algo = {};
  std::mutex mu;
};

cublasLtEpilogue_t cublas_epilogue(GemmEpilogue::Kind kind) {
  switch (kind) {
    case GemmEpilogue::Kind::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Kind::bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Kind::bias_grad_b: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

constexpr size_t kMaxCachedGemms = 4096;  // past this many keys the cache starts over

// A column-major layout from the plan's numbers, with the batch attributes when batched.
Layout make_layout(cudaDataType type, const GemmMatrix& m, int64_t batches) {
  cublasLtMatrixLayout_t raw = nullptr;
  QKV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, uint64_t(m.rows), uint64_t(m.cols), m.ld));
  Layout layout(raw);
  if (batches > 1) {
    const int32_t count = int32_t(batches);
    QKV_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    QKV_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.batch_stride,
                                                      sizeof(m.batch_stride)));
  }
  return layout;
}

// The element type cuBLASLt sees, and the type of alpha and beta (the scale type).
struct GemmTypes {
  cudaDataType data, scale;
  cublasComputeType_t compute;
};
GemmTypes gemm_types(DType dt) {
  switch (dt) {
    case DType::f64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    case DType::f32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::bf16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::f16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    default: throw DTypeError(cat("matmul: no cuBLASLt type for ", dtype_name(dt)));
  }
}

// Null when cuBLASLt has no algorithm: the caller runs an epilogue separately, and a plain GEMM
// again on aligned copies (gemm_on_aligned_copies).
std::unique_ptr<CachedGemm> build_gemm(cublasLtHandle_t handle, const GemmPlan& plan, GemmEpilogue::Kind epilogue,
                                       uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  const GemmTypes types = gemm_types(plan.dtype);
  const cudaDataType type = types.data;
  auto g = std::make_unique<CachedGemm>();
  cublasLtMatmulDesc_t raw_desc = nullptr;
  QKV_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, types.compute, types.scale));
  g->desc.reset(raw_desc);
  // cuBLASLt's A is our b, its B our a (see kernels/gemm_plan.h).
  const cublasOperation_t op_a = plan.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = plan.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  QKV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  QKV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  const cublasLtEpilogue_t ep = cublas_epilogue(epilogue);
  QKV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
  g->la = make_layout(type, plan.b, plan.batch_count);
  g->lb = make_layout(type, plan.a, plan.batch_count);
  g->lc = make_layout(type, plan.c, plan.batch_count);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Pref pref(raw_pref);
  const uint64_t ws = kWorkspaceBytes;
  QKV_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // align_a and align_b are our a's and b's: cuBLASLt's B and A.
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b,
                                                        sizeof(align_b)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a,
                                                        sizeof(align_a)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                        sizeof(align_c)));
  QKV_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                        sizeof(align_c)));

  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, raw_desc, g->la.get(), g->lb.get(), g->lc.get(),
                                                               g->lc.get(), raw_pref, 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    const bool no_algorithm = status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED;
    if (no_algorithm || epilogue != GemmEpilogue::Kind::none) return nullptr;
    check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
  }
  g->algo = heuristic.algo;
  return g;
}

// The cached cuBLASLt objects for this plan on this device, built on first use. Kept for the
// life of the process (never destroyed at exit, like the device contexts).
std::shared_ptr<CachedGemm> cached_gemm(int device, cublasLtHandle_t handle, const GemmPlan& plan,
                                        GemmEpilogue::Kind epilogue, uint32_t align_a, uint32_t align_b,
                                        uint32_t align_c) {
  PlanKey key = {device, int64_t(plan.dtype), plan.batch_count, int64_t(epilogue), align_a, align_b, align_c};
  size_t i = 7;
  for (const GemmMatrix* m : {&plan.a, &plan.b, &plan.c})
    for (int64_t v : {int64_t(m->transpose), m->rows, m->cols, m->ld, m->batch_stride}) key[i++] = v;
  static std::mutex mu;
  static auto* cache = new std::map<PlanKey, std::shared_ptr<CachedGemm>>();  // null: no epilogue algorithm
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxCachedGemms) cache->clear();  // calls still running keep their entries
  std::shared_ptr<CachedGemm> g = build_gemm(handle, plan, epilogue, align_a, align_b, align_c);
  cache->emplace(key, g);
  return g;
}

// ---- the cuBLASLt call -----------------------------------------------------------------------

// What cuBLASLt reads for one input: the input itself, or the packed copy the plan asks for.
Tensor operand_tensor(const Tensor& x, const GemmMatrix& m) {
  if (!m.packed) return x;
  Tensor copy = empty(m.packed_shape, {x.dtype(), x.device()});
  raw::copy(copy, x);  // x broadcast to packed_shape
  return copy;
}

// The address of batch 0's matrix: the plan's offset into the storage of the tensor read.
char* matrix_pointer(const Tensor& t, const GemmMatrix& m) {
  return static_cast<char*>(t.storage()->data()) + m.offset * int64_t(t.element_size());
}

// False (nothing enqueued) when cuBLASLt has no algorithm for the epilogue.
bool gemm(const GemmPlan& plan, const Tensor& a, const Tensor& b, const Tensor& out, const GemmEpilogue& ep) {
  const int device = out.device().index;
  QKV_CUDA_CHECK(cudaSetDevice(device));
  const DeviceContext& ctx = device_context(device);
  const void* pa = matrix_pointer(b, plan.b);  // cuBLASLt's A
  const void* pb = matrix_pointer(a, plan.a);  // cuBLASLt's B
  void* pc = matrix_pointer(out, plan.c);
  const uint32_t align_a = gemm_alignment(reinterpret_cast<uintptr_t>(pb), plan.a.align_stride_bytes);
  const uint32_t align_b = gemm_alignment(reinterpret_cast<uintptr_t>(pa), plan.b.align_stride_bytes);
  const uint32_t align_c = gemm_alignment(reinterpret_cast<uintptr_t>(pc), plan.c.align_stride_bytes);
  const std::shared_ptr<CachedGemm> g = cached_gemm(device, ctx.handle, plan, ep.kind, align_a, align_b, align_c);
  if (!g) return false;
  const double alpha64 = 1, beta64 = 0;  // alpha and beta have the scale type
  const float alpha32 = 1, beta32 = 0;
  const bool f64 = plan.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  cublasLtMatmulDesc_t desc = g->desc.get();
  std::unique_lock<std::mutex> lock(g->mu, std::defer_lock);  // only an epilogue's descriptor changes per call
  if (ep.kind != GemmEpilogue::Kind::none) {
    lock.lock();
    QKV_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep.bias, sizeof(ep.bias)));
  }
  QKV_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, desc, alpha, pa, g->la.get(), pb, g->lb.get(), beta, pc, g->lc.get(), pc,
                                  g->lc.get(), &g->algo, ctx.workspace, kWorkspaceBytes, qkv::cuda::current_stream()));
  return true;
}

// A copy of x whose rows start 16 bytes apart: the last dim padded to a multiple of 16 bytes in
// its storage (a fresh allocation, so its start is aligned too), the view narrowed back to x's
// shape. With copy false only the memory is made (for an output).
Tensor aligned_copy(const Tensor& x, bool copy = true) {
  Shape padded = x.shape();
  const int64_t per16 = std::max<int64_t>(1, 16 / int64_t(x.element_size()));
  padded.back() = (padded.back() + per16 - 1) / per16 * per16;
  const Tensor view = raw::slice(empty(padded, {x.dtype(), x.device()}), x.dim() - 1, 0, x.size(-1), 1);
  if (copy) raw::copy(view, x);
  return view;
}

// out = op(a) op(b) through copies of all three with aligned rows, for when cuBLASLt had no
// algorithm for them as they lie.
void gemm_on_aligned_copies(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b) {
  const Tensor a2 = aligned_copy(a), b2 = aligned_copy(b), out2 = aligned_copy(out, /*copy=*/false);
  const GemmPlan plan = plan_gemm(a2, b2, out2, trans_a, trans_b);
  check<DeviceError>(gemm(plan, operand_tensor(a2, plan.a), operand_tensor(b2, plan.b), out2, GemmEpilogue{}),
                     "matmul: cuBLASLt has no algorithm for ", dtype_name(plan.dtype), " (m=", plan.m, ", n=", plan.n,
                     ", k=", plan.k, ", batches=", plan.batch_count, "), even on copies with 16-byte aligned rows");
  raw::copy(out, out2);
}

}  // namespace

void matmul(const KernelArgs& k) {
  const auto& at = attr<MatmulAttrs>(k.attrs, "matmul");
  const Tensor& out = k.out[0];
  const GemmPlan plan = plan_gemm(k.in[0], k.in[1], out, at.trans_a, at.trans_b);
  if (plan.kind == GemmKind::nothing) return;
  if (plan.kind == GemmKind::zero_fill) {
    raw::fill(out, 0.0);
    return;
  }
  const Tensor a = operand_tensor(k.in[0], plan.a), b = operand_tensor(k.in[1], plan.b);
  if (!gemm(plan, a, b, out, GemmEpilogue{})) gemm_on_aligned_copies(k.in[0], k.in[1], out, at.trans_a, at.trans_b);
}

bool run_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
              const GemmEpilogue& epilogue) {
  const GemmPlan plan = plan_gemm(a, b, out, trans_a, trans_b);
  check<ValueError>(plan.kind == GemmKind::gemm && plan.batch_count == 1, "matmul: an epilogue needs one GEMM with ",
                    "a non-empty inner dim, got ", shape_str(out.shape()));
  if (gemm(plan, operand_tensor(a, plan.a), operand_tensor(b, plan.b), out, epilogue)) return true;
  if (epilogue.kind != GemmEpilogue::Kind::none) return false;  // the caller adds the epilogue itself
  gemm_on_aligned_copies(a, b, out, trans_a, trans_b);
  return true;
}

// Inputs (c, a, b; c written) -> c += op(a) op(b): the product into a temporary, then added by
// the elementwise kernel (c and the temporary have one shape, so the sum may overwrite c).
void matmul_accumulate(const KernelArgs& k) {
  const Tensor& c = k.in[0];
  if (c.numel() == 0) return;
  std::array<Tensor, 1> product{empty(c.shape(), {c.dtype(), c.device()})};
  const std::array<Tensor, 2> factors{k.in[1], k.in[2]};
  matmul(KernelArgs{factors, product, k.attrs});
  const std::array<Tensor, 2> terms{c, product[0]};
  std::array<Tensor, 1> sum{c};
  const Attrs none = NoAttrs{};
  add(KernelArgs{terms, sum, none});
}

}  // namespace qkv::kernels::cuda
