#include "kernels/cpu/library_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tensor/error.h"

#ifdef QKV_HAVE_ONEDNN
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#endif

namespace qkv::kernels::cpu {

#ifndef QKV_HAVE_ONEDNN

bool library_sgemm_enabled() { return false; }
bool library_bf16_gemm_enabled() { return false; }
bool set_library_gemm(bool) { return false; }
const char* library_gemm_description() { return "Eigen (this build has no oneDNN)"; }
void library_sgemm(const GemmMatrix&, const GemmMatrix&, float*, const float*) {
  throw DeviceError("library_sgemm: this build has no oneDNN");
}
void library_sgemm_accumulate(const GemmMatrix&, const GemmMatrix&, float*) {
  throw DeviceError("library_sgemm_accumulate: this build has no oneDNN");
}
void library_gemm_bf16(const GemmMatrix&, const GemmMatrix&, void*, DType, const void*, DType) {
  throw DeviceError("library_gemm_bf16: this build has no oneDNN");
}

#else

namespace {

bool env_allows_library() {
  const char* v = std::getenv("QKV_CPU_GEMM");
  return !v || std::strcmp(v, "eigen") != 0;
}
std::atomic<bool> g_enabled{env_allows_library()};

bool cpu_has_bf16_dot() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16 && __builtin_cpu_supports("avx512bf16");
}

// The product's memory layouts: op(X) as a [rows, cols] descriptor with strides, so a transposed
// operand costs nothing.
dnnl::memory::desc describe(const GemmMatrix& m, dnnl::memory::data_type t) {
  const dnnl::memory::dims strides = m.trans ? dnnl::memory::dims{1, m.ld} : dnnl::memory::dims{m.ld, 1};
  return dnnl::memory::desc({m.rows, m.cols}, t, strides);
}

// matmul primitives by dtypes, shape and layout: creating one costs about a millisecond, running
// a cached one nothing. A training step asks for the same few dozen shapes every time.
class Primitives {
 public:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, int, bool>;

  Primitives() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  // A and B bf16 (else float32), c of c_dtype; a bias (of bias_dtype, one per column of c) is
  // added to the float32 accumulator before c is written; with accumulate, c's old values too.
  void run(const GemmMatrix& a, const GemmMatrix& b, bool bf16_inputs, void* c, DType c_dtype, const void* bias,
           DType bias_dtype, bool accumulate = false) {
    using dt = dnnl::memory::data_type;
    auto of = [](DType d) { return d == DType::bf16 ? dt::bf16 : dt::f32; };
    const dt in = bf16_inputs ? dt::bf16 : dt::f32;
    const dnnl::memory::desc ad = describe(a, in), bd = describe(b, in);
    const dnnl::memory::desc cd({a.rows, b.cols}, of(c_dtype), dnnl::memory::dims{b.cols, 1});
    const dnnl::memory::desc biasd =
        bias ? dnnl::memory::desc({1, b.cols}, of(bias_dtype), dnnl::memory::dims{b.cols, 1}) : dnnl::memory::desc();
    std::lock_guard lock(mu_);
    const int bias_kind = bias ? (bias_dtype == DType::bf16 ? 2 : 1) : 0;
    const Key key{a.rows,    b.cols,    a.cols, a.ld, b.ld, a.trans, b.trans, bf16_inputs, c_dtype == DType::bf16,
                  bias_kind, accumulate};
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (cache_.size() >= 512) cache_.clear();  // a long-running process with ever new shapes
      const dnnl::matmul::desc d = bias ? dnnl::matmul::desc(ad, bd, biasd, cd) : dnnl::matmul::desc(ad, bd, cd);
      dnnl::primitive_attr attr;
      if (accumulate) {  // the sum post-op: dst = product + dst
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      it = cache_.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine_))).first;
    }
    dnnl::memory am(ad, engine_, const_cast<void*>(a.data)), bm(bd, engine_, const_cast<void*>(b.data)),
        cm(cd, engine_, c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(biasd, engine_, const_cast<void*>(bias)));
    it->second.execute(stream_, args);
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::mutex mu_;
  std::map<Key, dnnl::matmul> cache_;
};

Primitives& primitives() {
  static auto* p = new Primitives();  // never destroyed: kernels may run during static destruction
  return *p;
}

void check_status(dnnl_status_t s, const char* what) {
  check<DeviceError>(s == dnnl_success, what, ": oneDNN returned status ", int(s));
}

}  // namespace

bool library_sgemm_enabled() { return g_enabled.load(std::memory_order_relaxed); }
bool library_bf16_gemm_enabled() {
  static const bool has_bf16 = cpu_has_bf16_dot();
  return has_bf16 && g_enabled.load(std::memory_order_relaxed);
}
bool set_library_gemm(bool on) { return g_enabled.exchange(on); }

const char* library_gemm_description() {
  static const std::string d = [] {
    const dnnl_version_t* v = dnnl_version();
    return cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (float32 matmul and sgemm",
               cpu_has_bf16_dot() ? "; bfloat16 matmul on AVX512_BF16)" : "; no AVX512_BF16: bfloat16 in float32)");
  }();
  return d.c_str();
}

void library_sgemm(const GemmMatrix& a, const GemmMatrix& b, float* c, const float* bias) {
  // With a read row by row (x W^T, a linear layer's forward, and dY W, its input gradient) the
  // matmul primitive (brgemm) runs faster than sgemm on AVX-512: 5% of a GPT-2 124M step and 15%
  // of the encoder's dY W. A weight gradient (dY^T X: a transposed) runs faster through sgemm.
  // The choice depends on the layout alone, so a product is computed the same way every time.
  if (!a.trans) {
    try {
      return primitives().run(a, b, false, c, DType::f32, bias, DType::f32);
    } catch (const dnnl::error& e) {
      throw DeviceError(
          cat("matmul (oneDNN float32 matmul ", a.rows, "x", a.cols, " @ ", b.rows, "x", b.cols, "): ", e.what()));
    }
  }
  // sgemm adds the bias as C's starting value (beta = 1).
  if (bias)
    for (int64_t r = 0; r < a.rows; ++r) std::copy(bias, bias + b.cols, c + r * b.cols);
  check_status(dnnl_sgemm(a.trans ? 'T' : 'N', b.trans ? 'T' : 'N', a.rows, b.cols, a.cols, 1.0f,
                          static_cast<const float*>(a.data), a.ld, static_cast<const float*>(b.data), b.ld,
                          bias ? 1.0f : 0.0f, c, b.cols),
               "matmul (oneDNN sgemm)");
}

void library_sgemm_accumulate(const GemmMatrix& a, const GemmMatrix& b, float* c) {
  try {
    primitives().run(a, b, false, c, DType::f32, nullptr, DType::f32, /*accumulate=*/true);
  } catch (const dnnl::error& e) {
    throw DeviceError(cat("matmul_accumulate (oneDNN float32 matmul ", a.rows, "x", a.cols, " @ ", b.rows, "x", b.cols,
                          "): ", e.what()));
  }
}

void library_gemm_bf16(const GemmMatrix& a, const GemmMatrix& b, void* c, DType c_dtype, const void* bias,
                       DType bias_dtype) {
  try {
    primitives().run(a, b, true, c, c_dtype, bias, bias_dtype);
  } catch (const dnnl::error& e) {
    throw DeviceError(
        cat("matmul (oneDNN bf16 matmul ", a.rows, "x", a.cols, " @ ", b.rows, "x", b.cols, "): ", e.what()));
  }
}

#endif

}  // namespace qkv::kernels::cpu
