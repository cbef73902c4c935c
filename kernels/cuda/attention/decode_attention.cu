// Split-KV (flash-decoding) attention for a few new query rows against a long KV cache. The
// regular kernels give each (batch, head) one block that walks every key, which at batch 1 is a
// handful of blocks on a GPU with 132 SMs. Here the keys are cut into `splits` chunks of whole
// 64-key tiles, and block (b, KV head, split) serves all G = group x T query rows that read that
// KV head: each cache tile is loaded once (converted to float32 in shared memory) for every
// query head of the group, and once for both products when K and V are one tensor (K=V). The
// block keeps an online softmax per row (max, sum, unnormalised output) and writes it to a
// float32 workspace; the combine kernel rescales the splits to their common max and writes out
// (in q's dtype) and lse (float32). Bottom-right causal masking as everywhere: row t of T sees
// keys j <= t + S - T. No atomics: every output is written by one thread. An int8 cache is read
// as it is stored and widened a tile at a time in shared memory (each row times its float32
// scale), never copied whole. Keys stored unrotated (a K=V cache under RoPE) are turned by their
// rows of the rotary tables as the K tile is loaded; the V tile is then loaded apart from it,
// from the same rows (the second read finds them in L2). The K tile's rows are D + 1 floats apart: the score loop gives
// consecutive lanes consecutive keys, and with rows of D (a multiple of 32) floats all 32 lanes
// of a warp would read one shared-memory bank.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention/decode_attention.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/layout.h"
#include "tensor/cuda/check.h"
#include "tensor/cuda/device_errors.cuh"
#include "tensor/half.h"

namespace qkv::kernels::cuda {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kKeys = 64;     // keys per shared tile; a split is whole tiles
constexpr int kMaxRows = 16;  // G = group x T
constexpr int kMaxDim = 256;  // D and Dv
constexpr int kMaxQueryRows = 8;
constexpr int kSlots = kMaxRows * kMaxDim / kThreads;  // output accumulators per thread
constexpr unsigned kAll = 0xffffffffu;

// St: the queries' and output's element type; Kv: the cache's (St, or int8_t with row scales).
template <class St, class Kv = St> struct DecodeArgs {
  const St* q = nullptr;
  const Kv *k = nullptr, *v = nullptr;
  const float *k_scale = nullptr, *v_scale = nullptr;  // int8: one per cached row, [B, Hk, S, 1]
  const float *rot_cos = nullptr, *rot_sin = nullptr;  // keys turned as read: [P, rot_half], or null
  int rot_half = 0;
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};  // element strides of batch, head and row
  int64_t kss[3] = {}, vss[3] = {};            // the scales' strides
  int64_t H = 0, Hk = 0, T = 0, S = 0, group = 1, chunk = 0;
  int D = 0, Dv = 0, G = 0, splits = 1;
  float scale = 1;
  bool causal = false, kv_shared = false;
  float* part_acc = nullptr;  // [B Hk, splits, G, Dv]: unnormalised outputs
  float* part_ml = nullptr;   // [B Hk, splits, G, 2]: running max and sum
  // cache_attention: the new rows' first position, read on the device: the keys in use are
  // [0, *start + T) (S is then the cache's capacity, which the splits cover; splits past the
  // keys in use are empty). nullptr: all S.
  const int64_t* start = nullptr;
  qkv::cuda::DeviceErrorRecord* record = nullptr;  // where a start that does not fit is reported
  const char* op = nullptr;                        // the host's name for it (read back by the host)
};

// The keys in use: S, or *start + T clamped to [0, S] (a start that does not fit is reported
// once, by the first block, as cache_attention's index error).
template <class St, class Kv> __device__ __forceinline__ int64_t keys_in_use(const DecodeArgs<St, Kv>& a) {
  if (!a.start) return a.S;
  const int64_t s = *a.start;
  if (s >= 0 && s + a.T <= a.S) return s + a.T;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
    qkv::cuda::report_device_error(a.record, qkv::cuda::DeviceErrorKind::index, a.op, s, 0, a.S - a.T + 1, 0);
  return s < 0 ? 0 : a.S;
}

// Query row t of T sees keys [0, visible): all, or bottom-right causal.
template <class St, class Kv> __device__ __forceinline__ int64_t visible(const DecodeArgs<St, Kv>& a, int64_t t) {
  if (!a.causal) return a.S;
  const int64_t e = t + 1 + a.S - a.T;
  return e < 0 ? 0 : e > a.S ? a.S : e;
}

// Floats of shared memory one block uses.
int64_t smem_floats(int G, int D, int Dv, bool kv_shared) {
  return int64_t(G) * D + int64_t(kKeys) * (D + 1) + (kv_shared ? 0 : int64_t(kKeys) * Dv) + int64_t(G) * kKeys + 3 * G;
}

// Cached row r of a head, element d, as float: int8 rows times their scale.
template <class Kv>
__device__ __forceinline__ float cached(const Kv* head, const float* scales, int64_t row_stride, int64_t scale_stride,
                                        int64_t r, int d) {
  if constexpr (std::is_same_v<Kv, int8_t>) return float(head[r * row_stride + d]) * scales[r * scale_stride];
  else return float(head[r * row_stride + d]);
}

template <class St, class Kv> __global__ void __launch_bounds__(kThreads) split_kernel(DecodeArgs<St, Kv> a) {
  a.S = keys_in_use(a);
  QKV_DYNAMIC_SHARED(float, smem);
  const float neg_inf = -CUDART_INF_F;
  const int kld = a.D + 1, vld = a.kv_shared ? kld : a.Dv;        // row strides of the K and V tiles
  float* qs = smem;                                               // [G][D]
  float* ks = qs + a.G * a.D;                                     // [kKeys][kld]
  float* vs = a.kv_shared ? ks : ks + kKeys * kld;                // [kKeys][vld]; K=V: the same tile
  float* sc = a.kv_shared ? ks + kKeys * kld : vs + kKeys * vld;  // [G][kKeys]: scores, then p
  float* mrow = sc + a.G * kKeys;
  float* lrow = mrow + a.G;
  float* crow = lrow + a.G;  // the tile's correction of each row
  const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int64_t bhk = blockIdx.x, b = bhk / a.Hk, hk = bhk % a.Hk;
  const int split = int(blockIdx.y);
  const int64_t k0 = int64_t(split) * a.chunk, k1 = min(a.S, k0 + a.chunk);

  for (int idx = tid; idx < a.G * a.D; idx += kThreads) {
    const int g = idx / a.D, d = idx % a.D;
    const int64_t h = hk * a.group + g / a.T, t = g % a.T;
    qs[idx] = float(a.q[b * a.qs[0] + h * a.qs[1] + t * a.qs[2] + d]);
  }
  for (int g = tid; g < a.G; g += kThreads) {
    mrow[g] = neg_inf;
    lrow[g] = 0.f;
  }
  float acc[kSlots];
#pragma unroll
  for (int n = 0; n < kSlots; ++n) acc[n] = 0.f;
  const int pairs = a.G * a.Dv;  // thread tid owns outputs tid + kThreads n: row idx / Dv, column idx % Dv

  for (int64_t j0 = k0; j0 < k1; j0 += kKeys) {
    const int nj = int(min(int64_t(kKeys), k1 - j0));
    __syncthreads();  // the previous tile's readers are done (and the queries are stored)
    const Kv* kh = a.k + b * a.ks[0] + hk * a.ks[1];
    const float* kscale = a.k_scale ? a.k_scale + b * a.kss[0] + hk * a.kss[1] : nullptr;
    for (int idx = tid; idx < kKeys * a.D; idx += kThreads) {
      const int r = idx / a.D, d = idx % a.D;
      float x = 0.f;
      if (r < nj) {
        x = cached(kh, kscale, a.ks[2], a.kss[2], j0 + r, d);
        if (a.rot_cos && d < 2 * a.rot_half) {  // rotate-half pairs (d, d + R/2)
          const int half = a.rot_half, c = d % half;
          const int64_t row = (j0 + r) * half + c;
          const float partner = cached(kh, kscale, a.ks[2], a.kss[2], j0 + r, d < half ? d + half : d - half);
          x = d < half ? x * a.rot_cos[row] - partner * a.rot_sin[row] : x * a.rot_cos[row] + partner * a.rot_sin[row];
        }
      }
      ks[r * kld + d] = x;
    }
    if (!a.kv_shared) {
      const Kv* vh = a.v + b * a.vs[0] + hk * a.vs[1];
      const float* vscale = a.v_scale ? a.v_scale + b * a.vss[0] + hk * a.vss[1] : nullptr;
      for (int idx = tid; idx < kKeys * a.Dv; idx += kThreads) {
        const int r = idx / a.Dv, d = idx % a.Dv;
        vs[idx] = r < nj ? cached(vh, vscale, a.vs[2], a.vss[2], j0 + r, d) : 0.f;
      }
    }
    __syncthreads();
    for (int idx = tid; idx < a.G * kKeys; idx += kThreads) {
      const int g = idx / kKeys, j = idx % kKeys;
      float s = neg_inf;
      if (j < nj && j0 + j < visible(a, g % a.T)) {
        const float* qrow = qs + g * a.D;
        const float* krow = ks + j * kld;
        float dot = 0.f;
        for (int d = 0; d < a.D; ++d) dot += qrow[d] * krow[d];
        s = dot * a.scale;
      }
      sc[idx] = s;
    }
    __syncthreads();
    for (int g = warp; g < a.G; g += kWarps) {  // one warp per row: lanes hold keys lane, lane + 32
      const float m_old = mrow[g];
      const float x0 = sc[g * kKeys + lane], x1 = sc[g * kKeys + lane + 32];
      float mx = fmaxf(x0, x1);
      for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(kAll, mx, off));
      const float m_new = fmaxf(m_old, mx);
      const float p0 = m_new == neg_inf ? 0.f : expf(x0 - m_new), p1 = m_new == neg_inf ? 0.f : expf(x1 - m_new);
      sc[g * kKeys + lane] = p0;
      sc[g * kKeys + lane + 32] = p1;
      float sum = p0 + p1;
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(kAll, sum, off);
      if (lane == 0) {
        const float corr = m_new == neg_inf ? 1.f : expf(m_old - m_new);
        crow[g] = corr;
        lrow[g] = lrow[g] * corr + sum;
        mrow[g] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kSlots; ++n) {
      const int idx = tid + kThreads * n;
      if (idx < pairs) {
        const int g = idx / a.Dv, c = idx % a.Dv;
        const float* p = sc + g * kKeys;
        float x = acc[n] * crow[g];
        for (int j = 0; j < nj; ++j) x += p[j] * vs[j * vld + c];
        acc[n] = x;
      }
    }
  }
  __syncthreads();  // the last tile's row statistics are written
  float* pa = a.part_acc + (bhk * a.splits + split) * int64_t(pairs);
#pragma unroll
  for (int n = 0; n < kSlots; ++n) {
    const int idx = tid + kThreads * n;
    if (idx < pairs) pa[idx] = acc[n];
  }
  float* pml = a.part_ml + (bhk * a.splits + split) * int64_t(a.G) * 2;
  for (int g = tid; g < a.G; g += kThreads) {
    pml[2 * g] = mrow[g];
    pml[2 * g + 1] = lrow[g];
  }
}

// One block per (b, KV head, row g): the splits rescaled to their common max and summed.
template <class St, class Kv> __global__ void combine_kernel(DecodeArgs<St, Kv> a, St* out, float* lse) {
  const float neg_inf = -CUDART_INF_F;  // (splits past cache_attention's keys in use hold -inf maxima)
  const int64_t row = blockIdx.x, bhk = row / a.G;
  const int g = int(row % a.G);
  const float* pml = a.part_ml + bhk * a.splits * int64_t(a.G) * 2;
  float M = neg_inf, L = 0.f;
  for (int s = 0; s < a.splits; ++s) M = fmaxf(M, pml[(s * a.G + g) * 2]);
  for (int s = 0; s < a.splits; ++s) {
    const float m = pml[(s * a.G + g) * 2];
    if (m != neg_inf) L += pml[(s * a.G + g) * 2 + 1] * expf(m - M);
  }
  const int64_t b = bhk / a.Hk, hk = bhk % a.Hk, h = hk * a.group + g / a.T, t = g % a.T;
  const int64_t orow = (b * a.H + h) * a.T + t;
  for (int c = int(threadIdx.x); c < a.Dv; c += int(blockDim.x)) {
    float x = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float m = pml[(s * a.G + g) * 2];
      if (m != neg_inf) x += a.part_acc[((bhk * a.splits + s) * a.G + g) * int64_t(a.Dv) + c] * expf(m - M);
    }
    out[orow * a.Dv + c] = St(L > 0.f ? x / L : 0.f);  // a row that sees no key: zeros
  }
  if (threadIdx.x == 0) lse[orow] = L > 0.f ? M + logf(L) : neg_inf;
}

int shared_limit() {
  int device = 0, limit = 0;
  QKV_CUDA_CHECK(cudaGetDevice(&device));
  QKV_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limit;
}

template <class St, class Kv>
void run(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionAttrs& at, const Tensor& out,
         const Tensor& lse, const CacheExtras& cache) {
  const Tensor &k_scale = cache.k_scale, &v_scale = cache.v_scale;
  DecodeArgs<St, Kv> a;
  a.start = cache.start;
  if (a.start) {
    a.record = qkv::cuda::device_error_record(q.device().index);
    a.op = "cache_attention";
  }
  a.q = q.data<St>();
  a.k = k.data<Kv>();
  a.v = v.data<Kv>();
  if constexpr (std::is_same_v<Kv, int8_t>) {
    a.k_scale = k_scale.data<float>();
    a.v_scale = v_scale.data<float>();
  }
  for (int d = 0; d < 3; ++d) {
    a.qs[d] = q.stride(d);
    a.ks[d] = k.stride(d);
    a.vs[d] = v.stride(d);
    if constexpr (std::is_same_v<Kv, int8_t>) {
      a.kss[d] = k_scale.stride(d);
      a.vss[d] = v_scale.stride(d);
    }
  }
  const int64_t B = q.size(0);
  a.H = q.size(1);
  a.Hk = k.size(1);
  a.T = q.size(2);
  a.S = k.size(2);
  a.group = a.H / a.Hk;
  a.D = int(q.size(3));
  a.Dv = int(v.size(3));
  a.G = int(a.group * a.T);
  a.scale = float(at.scale);
  a.causal = at.causal;
  const bool rotary = cache.cos.defined();
  a.kv_shared = same_view(k, v) && !rotary;
  if (B * a.H * a.T == 0) return;
  set_device(q);
  Tensor rot_cos, rot_sin;  // float32 on q's device (the model's tables already are)
  if (rotary) {
    rot_cos = raw::contiguous(raw::to(cache.cos, DType::f32, q.device()));
    rot_sin = raw::contiguous(raw::to(cache.sin, DType::f32, q.device()));
    a.rot_cos = rot_cos.data<float>();
    a.rot_sin = rot_sin.data<float>();
    a.rot_half = int(rot_cos.size(1));
  }
  int device = 0, sms = 0;
  QKV_CUDA_CHECK(cudaGetDevice(&device));
  QKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough blocks for two per SM, in whole tiles.
  const int64_t blocks = B * a.Hk, tiles = (a.S + kKeys - 1) / kKeys;
  const int64_t want = std::clamp<int64_t>((2 * int64_t(sms) + blocks - 1) / blocks, 1, std::max<int64_t>(tiles, 1));
  a.chunk = (tiles + want - 1) / want * kKeys;
  a.splits = int((a.S + a.chunk - 1) / a.chunk);
  if (a.splits == 0) a.splits = 1;  // S == 0: every row sees nothing
  const Device dev = q.device();
  const Tensor part_acc = empty({blocks * a.splits * a.G * a.Dv}, {DType::f32, dev});
  const Tensor part_ml = empty({blocks * a.splits * a.G * 2}, {DType::f32, dev});
  a.part_acc = part_acc.data<float>();
  a.part_ml = part_ml.data<float>();
  const size_t smem = size_t(smem_floats(a.G, a.D, a.Dv, a.kv_shared)) * sizeof(float);
  if (smem > 48 * 1024)
    QKV_CUDA_CHECK(cudaFuncSetAttribute(split_kernel<St, Kv>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  QKV_LAUNCH(dim3(unsigned(blocks), unsigned(a.splits)), kThreads, smem, launch_stream(), split_kernel<St, Kv>)(a);
  QKV_CUDA_LAUNCH_CHECK();
  QKV_LAUNCH(unsigned(blocks * a.G), 128, 0, launch_stream(), combine_kernel<St, Kv>)
  (a, out.data<St>(), lse.data<float>());
  QKV_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool split_kv_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, bool any_length,
                       bool rotary) {
  const DType dt = q.dtype();
  if ((dt != DType::f32 && dt != DType::bf16 && dt != DType::f16) || bias.defined()) return false;
  if (k.dtype() != v.dtype() || (k.dtype() != dt && k.dtype() != DType::i8)) return false;
  const int64_t T = q.size(2), G = (q.size(1) / k.size(1)) * T, D = q.size(3), Dv = v.size(3), S = k.size(2);
  if (T > kMaxQueryRows || G > kMaxRows || D > kMaxDim || Dv > kMaxDim || (S < 2 * kKeys && !any_length)) return false;
  if (q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1) return false;
  const bool kv_shared = same_view(k, v) && !rotary;
  return smem_floats(int(G), int(D), int(Dv), kv_shared) * int64_t(sizeof(float)) <= shared_limit();
}

void split_kv_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionAttrs& attrs,
                        const Tensor& out, const Tensor& lse, const CacheExtras& cache) {
  const bool int8 = k.dtype() == DType::i8;
  check<ValueError>(!int8 || (cache.k_scale.defined() && cache.v_scale.defined()),
                    "attention: an int8 cache needs its row scales");
  auto go = [&]<class St>() {
    if (int8) run<St, int8_t>(q, k, v, attrs, out, lse, cache);
    else run<St, St>(q, k, v, attrs, out, lse, cache);
  };
  switch (q.dtype()) {
    case DType::f32: go.template operator()<float>(); return;
    case DType::bf16: go.template operator()<bf16>(); return;
    case DType::f16: go.template operator()<f16>(); return;
    default:
      throw DTypeError(cat("attention: the split-KV kernel takes float32, bf16 or f16, got ", dtype_name(q.dtype())));
  }
}

}  // namespace qkv::kernels::cuda
