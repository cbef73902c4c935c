// cuBLASLt for the emulated device (QKV_CUDA_EMU builds link this instead of libcublasLt): the
// calls kernels/cuda/matmul.cpp makes, with cuBLASLt's documented semantics, so the plan that
// file builds (kernels/gemm_plan.h: layouts, ops, batch strides, packing) is executed as the
// real library would read it. Column-major D = alpha op(A) op(B) + beta C per batch, products
// summed in double and rounded once to D's type; the epilogues BIAS (D[i][j] += bias[i], bias of
// D's type) and BGRADB (bias[j] = the sum over k of op(B)[k][j], written in D's type).
// What the real library refuses, the heuristic refuses too (no algorithm, as cuBLASLt answers on
// an H200), so the callers' fallbacks run here as they do there: an epilogue with float64
// compute, an epilogue on a batched product; and a product whose pointers are less aligned than
// the preference promised is refused at cublasLtMatmul.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_emu/device_memory.h"

namespace {

struct Layout {
  cudaDataType type;
  int64_t rows, cols, ld, batch_count, batch_stride;
};
struct Desc {
  cublasComputeType_t compute;
  cudaDataType scale;
  cublasOperation_t trans_a, trans_b;
  cublasLtEpilogue_t epilogue;
  const void* bias;
};
// The alignments (bytes) the caller promised for A, B, C and D.
struct Preference {
  uint32_t align[4];
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t) && std::is_trivially_copyable_v<Layout>);
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t) && std::is_trivially_copyable_v<Desc>);
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t) &&
              std::is_trivially_copyable_v<Preference>);

template <class T> T* as(void* opaque) { return reinterpret_cast<T*>(opaque); }

// Element (r, c) of batch b of a matrix of `type` as double, and back.
double load(cudaDataType type, const void* base, int64_t i) {
  switch (type) {
    case CUDA_R_64F: return static_cast<const double*>(base)[i];
    case CUDA_R_32F: return static_cast<const float*>(base)[i];
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
    default: return 0;
  }
}
void store(cudaDataType type, void* base, int64_t i, double v) {
  switch (type) {
    case CUDA_R_64F: static_cast<double*>(base)[i] = v; break;
    case CUDA_R_32F: static_cast<float*>(base)[i] = float(v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(float(v)); break;
    case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half_rn(float(v)); break;
    default: break;
  }
}
bool known(cudaDataType type) {
  return type == CUDA_R_64F || type == CUDA_R_32F || type == CUDA_R_16BF || type == CUDA_R_16F;
}
double scalar(cudaDataType scale, const void* p) {
  return scale == CUDA_R_64F ? *static_cast<const double*>(p) : *static_cast<const float*>(p);
}

// op(X)[i][p] of a column-major matrix.
int64_t at(const Layout& l, cublasOperation_t op, int64_t i, int64_t p, int64_t batch) {
  const int64_t r = op == CUBLAS_OP_N ? i : p, c = op == CUBLAS_OP_N ? p : i;
  return batch * l.batch_stride + r + c * l.ld;
}

template <class T> cublasStatus_t set(T& field, const void* buf, size_t bytes) {
  if (bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// One call's operands, read out of its descriptors.
struct Product {
  Desc d;
  Layout la, lb, lc, ld;
  double alpha, beta;
  const void *A, *B, *C;
  void* D;
  // The product's k: op(A)'s columns.
  int64_t inner() const { return d.trans_a == CUBLAS_OP_N ? la.cols : la.rows; }
};

cublasStatus_t check(const Product& g) {
  const Desc& d = g.d;
  const int64_t m = g.ld.rows, n = g.ld.cols, k = g.inner();
  const int64_t a_rows = d.trans_a == CUBLAS_OP_N ? g.la.rows : g.la.cols;
  const int64_t b_rows = d.trans_b == CUBLAS_OP_N ? g.lb.rows : g.lb.cols;
  const int64_t b_cols = d.trans_b == CUBLAS_OP_N ? g.lb.cols : g.lb.rows;
  if (a_rows != m || b_rows != k || b_cols != n || g.lc.rows != m || g.lc.cols != n) return CUBLAS_STATUS_INVALID_VALUE;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && d.epilogue != CUBLASLT_EPILOGUE_BIAS &&
      d.epilogue != CUBLASLT_EPILOGUE_BGRADB)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && (d.bias == nullptr || g.ld.batch_count != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

void run(const Product& g) {
  const qkv::cuda_emu::DeviceAccess access;
  const Desc& d = g.d;
  const Layout &la = g.la, &lb = g.lb, &lc = g.lc, &ld = g.ld;
  const int64_t m = ld.rows, n = ld.cols, k = g.inner();
  const void *A = g.A, *B = g.B, *C = g.C;
  void* D = g.D;
  const double al = g.alpha, be = g.beta;
  // Per batch: op(A) as m x k and op(B) as k x n in double, row-major, then D row by row.
  std::vector<double> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), row(static_cast<size_t>(n));
  for (int64_t batch = 0; batch < ld.batch_count; ++batch) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) a[size_t(i * k + p)] = load(la.type, A, at(la, d.trans_a, i, p, batch));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b[size_t(p * n + j)] = load(lb.type, B, at(lb, d.trans_b, p, j, batch));
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t p = 0; p < k; ++p) {
        const double x = a[size_t(i * k + p)];
        const double* bp = &b[size_t(p * n)];
        for (int64_t j = 0; j < n; ++j) row[size_t(j)] += x * bp[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        double v = al * row[size_t(j)];
        if (be != 0) v += be * load(lc.type, C, at(lc, CUBLAS_OP_N, i, j, batch));
        if (d.epilogue == CUBLASLT_EPILOGUE_BIAS) v += load(ld.type, d.bias, i);
        store(ld.type, D, at(ld, CUBLAS_OP_N, i, j, batch), v);
      }
    }
  }
  if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += load(lb.type, B, at(lb, d.trans_b, p, j, 0));
      store(ld.type, const_cast<void*>(d.bias), j, sum);
    }
}

}  // namespace

struct cublasLtContext {};

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value (emulated cuBLASLt)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported by the emulated cuBLASLt";
    default: return "internal error (emulated cuBLASLt)";
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!known(type) || ld < int64_t(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{};
  *as<Layout>(*layout) = Layout{type, int64_t(rows), int64_t(cols), ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  Layout& l = *as<Layout>(layout);
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
    int32_t count = 0;
    const cublasStatus_t s = set(count, buf, bytes);
    l.batch_count = count;
    return s;
  }
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) return set(l.batch_stride, buf, bytes);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (scale != CUDA_R_32F && scale != CUDA_R_64F) return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = new cublasLtMatmulDescOpaque_t{};
  *as<Desc>(*desc) = Desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  Desc& d = *as<Desc>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(d.trans_a, buf, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(d.trans_b, buf, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(d.epilogue, buf, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(d.bias, buf, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  *as<Preference>(*pref) = Preference{{256, 256, 256, 256}};  // the library's default promise
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  Preference& p = *as<Preference>(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set(p.align[0], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set(p.align[1], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set(p.align[2], buf, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set(p.align[3], buf, bytes);
    default: return CUBLAS_STATUS_SUCCESS;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found) {
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  *found = 0;
  const Desc& d = *as<Desc>(desc);
  if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && d.compute == CUBLAS_COMPUTE_64F) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  // The alignment promise travels with the algorithm, as the real library's choice depends on it.
  static_assert(sizeof(Preference) <= sizeof(results[0].algo.data));
  std::memcpy(results[0].algo.data, as<Preference>(pref), sizeof(Preference));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t stream) {
  const Desc& d = *as<Desc>(desc);
  const Product g{d,
                  *as<Layout>(a_desc),
                  *as<Layout>(b_desc),
                  *as<Layout>(c_desc),
                  *as<Layout>(d_desc),
                  scalar(d.scale, alpha),
                  scalar(d.scale, beta),
                  A,
                  B,
                  C,
                  D};
  const cublasStatus_t status = check(g);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (algo != nullptr) {  // pointers less aligned than the algorithm was chosen for
    Preference promised;
    std::memcpy(&promised, algo->data, sizeof promised);
    const void* ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; ++i)
      if (promised.align[i] > 0 && reinterpret_cast<uintptr_t>(ptrs[i]) % promised.align[i] != 0)
        return CUBLAS_STATUS_INVALID_VALUE;
  }
  // A stream that captures a graph records the product (descriptors and scalars as they are now).
  if (auto* graph = qkv::cuda_emu::capture_of(stream)) graph->push_back([g] { run(g); });
  else run(g);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
